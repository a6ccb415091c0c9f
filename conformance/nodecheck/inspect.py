"""What a prepared claim left on the node: its CDI devices and device metadata files.

``inspect_answer`` resolves every CDI id of a prepare answer in the node's CDI folders and, for
metadata CDI ids (``<driver>/metadata=<claimUID>_<request>``), reads the mounted metadata file
and checks it against the claim's allocation. It returns (CDI problems, metadata problems,
number of metadata ids); ``answer_problems`` checks the answer itself against the allocation.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from . import cdi as cdicheck
from . import metadata as mdcheck
from .calls import Answer, claim_ref


def inspect_answer(claim: dict[str, Any], answer: Answer, driver: str, cdi_dirs: Sequence[Path],
                   results: Sequence[dict[str, Any]]) -> tuple[list[str], list[str], int]:
    index = cdicheck.SpecIndex.load(cdi_dirs)
    cdi_problems: list[str] = []
    md_problems: list[str] = []
    md_count = 0
    uid = claim_ref(claim)[2]
    for cdi_id in answer.ids():
        try:
            vendor, klass, name = cdicheck.parse_device_id(cdi_id)
        except cdicheck.CdiError as err:
            cdi_problems.append(str(err))
            continue
        found = index.devices.get(cdi_id)
        if found is None:
            related = {p: v for p, v in index.problems.items() if uid in p or driver in p}
            hint = f"; problems in related spec files: {related}" if related else ""
            cdi_problems.append(f"{cdi_id} is not defined in any valid spec in "
                                f"{', '.join(map(str, cdi_dirs))}{hint}")
            continue
        if f"{vendor}/{klass}" == f"{driver}/metadata":
            md_count += 1
            md_problems += [f"{cdi_id}: {p}" for p in check_metadata(claim, name, found, driver, results)]
    return cdi_problems, md_problems, md_count


def check_metadata(claim: dict[str, Any], name: str, found: cdicheck.SpecDevice, driver: str,
                   results: Sequence[dict[str, Any]]) -> list[str]:
    _, claim_name, uid = claim_ref(claim)
    if not name.startswith(f"{uid}_"):
        return [f"metadata device name {name!r} is not <claimUID>_<request>"]
    request = name[len(uid) + 1:]
    mounts = (found.device.get("containerEdits") or {}).get("mounts") or []
    if len(mounts) != 1:
        return [f"expected one mount, got {len(mounts)}"]
    mount = mounts[0]
    problems = []
    parsed = mdcheck.parse_container_path(mount.get("containerPath", ""))
    pod_claim = (claim["metadata"].get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name")
    if parsed is None or parsed["request"] != request or parsed["driver"] != driver \
            or parsed["claim"] != (pod_claim or claim_name):
        problems.append(f"containerPath {mount.get('containerPath')!r} is not the documented "
                        f"{mdcheck.CONTAINER_ROOT}/.../{pod_claim or claim_name}/{request}/"
                        f"{driver}-metadata.json")
    if "ro" not in (mount.get("options") or []):
        problems.append("the metadata mount is not read-only")
    from ..inputs import DRIVER_FILE, InputError, read_text
    try:  # a path the driver named: drakit's one reader (a regular file, its size bounded)
        text = read_text(mount["hostPath"], DRIVER_FILE)
    except KeyError as err:
        return problems + [f"cannot read hostPath {mount.get('hostPath')!r}: {err}"]
    except InputError as err:
        return problems + [f"cannot read hostPath {mount.get('hostPath')!r}: {err.reason}"]
    expected = [(r["pool"], r["device"]) for r in results if r.get("request", "").partition("/")[0] == request]
    return problems + mdcheck.check_stream(text, claim=claim, driver=driver, request=request, expected=expected)


def answer_problems(claim: dict[str, Any], answer: Answer | None, results: Sequence[dict[str, Any]],
                    service: str) -> list[str]:
    """What is wrong with one claim's prepare answer, given the claim's allocation results of
    this driver and the DRA service that answered (share IDs exist in v1 only)."""
    name = claim_ref(claim)[1]
    if answer is None:
        return [f"{name}: no answer"]
    if not answer.present:
        return [f"{name}: the answer has no entry for the claim"]
    if answer.error:
        return [f"{name}: prepare failed: {answer.error}"]
    problems = [f"{name}: {p}" for p in devices_against_allocation(
        results, [(tuple(r), p, n) for r, p, n, _, _ in answer.devices])]
    for _requests, _pool, _device, ids, _share in answer.devices:
        for cdi_id in ids:
            try:
                cdicheck.parse_device_id(cdi_id)
            except cdicheck.CdiError as err:
                problems.append(f"{name}: {err}")
    shares = {(r["pool"], r["device"], r["shareID"]) for r in results if r.get("shareID")}
    if service == "v1.DRAPlugin" and shares:
        got_shares = {(p, n, s) for _, p, n, _, s in answer.devices if s}
        if not shares <= got_shares:
            problems.append(f"{name}: share IDs {sorted(got_shares)}, expected {sorted(shares)}")
    return problems


def devices_against_allocation(results: Sequence[dict[str, Any]],
                               devices: Sequence[tuple[Sequence[str], str, str]]) -> list[str]:
    """What is wrong with the devices a driver's NodePrepareResources answer names for one claim
    (``devices``: request names, pool, device), given the claim's allocation results of that
    driver: every allocated device named, with the requests it was allocated for (no request
    names: all of them), no device named more often than allocated, and nothing else."""
    want = Counter((r["pool"], r["device"]) for r in results)
    got = Counter((pool, device) for _, pool, device in devices)
    problems = []
    stray = sorted(f"{p}/{d}" for p, d in got if (p, d) not in want)
    if stray:
        problems.append(f"the answer names device(s) {', '.join(stray)}, which the claim was not allocated "
                        f"(allocated: {', '.join(sorted(f'{p}/{d}' for p, d in want)) or 'none'})")
    missing = sorted(f"{p}/{d}" for p, d in want if (p, d) not in got)
    if missing:
        problems.append(f"the answer does not name the allocated device(s) {', '.join(missing)}")
    twice = sorted(f"{p}/{d} ({got[(p, d)]} times, allocated {want[(p, d)]})" for p, d in got
                   if (p, d) in want and got[(p, d)] > want[(p, d)])
    if twice:
        problems.append(f"the answer names {', '.join(twice)}")
    requests: dict[tuple[str, str], set[str]] = {}
    for r in results:
        requests.setdefault((r["pool"], r["device"]), set()).add(r.get("request", "").partition("/")[0])
    named: dict[tuple[str, str], set[str]] = {}
    serves_all = set()  # named with no request names: the device serves every request (the proto's rule)
    for request_names, pool, device in devices:
        named.setdefault((pool, device), set()).update(request_names)
        if not request_names:
            serves_all.add((pool, device))
    for (pool, device), names in sorted(named.items()):
        if (pool, device) not in want:
            continue
        extra = names - requests[(pool, device)]
        if extra:
            problems.append(f"device {pool}/{device} serves requests {sorted(extra)} it was not allocated for "
                            "(or names a subrequest)")
        lacking = set() if (pool, device) in serves_all else \
            requests[(pool, device)] - {n.partition("/")[0] for n in names}
        if lacking:
            problems.append(f"device {pool}/{device} does not name request(s) {sorted(lacking)} it was allocated for "
                            "(the kubelet gives a container only the devices of the requests it uses)")
    return problems
