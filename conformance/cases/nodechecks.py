"""Assertions on what a node did: the kubelet's calls to the drivers (``nodeOperations``), the
device metadata files a driver wrote (``deviceMetadata``), what the container runtime gave a
container (``container``). Written against a backend session only, as ``checks``."""

from __future__ import annotations

from typing import Any, Callable

from ..backends.base import Session
from .checks import ExpectationFailed, _claim, _describe, _optional, _results, claim_name
from .matching import mismatches

def check_node_operations(s: Session, body: dict[str, Any]) -> None:
    ops = _optional(s, "node_operations", "the kubelet's node operations")()
    name = claim_name(s, body["claim"])
    mine = [o for o in ops if o["claim"] == f"{s.namespace}/{name}" and ("driver" not in body or o["driver"] == body["driver"])]
    for field_, op in (("prepared", "NodePrepareResources"), ("unprepared", "NodeUnprepareResources")):
        if field_ not in body:
            continue
        calls = [o for o in mine if o["operation"] == op]
        got = "none" if not calls else "skipped" if all(o["skipped"] for o in calls) else "called"
        if got != body[field_]:
            raise ExpectationFailed(f"claim {_describe(body['claim'])}: {op} was {got}, expected {body[field_]}",
                                    expected=body[field_], actual=calls)
    for field_, op in (("preparedCalls", "NodePrepareResources"), ("unpreparedCalls", "NodeUnprepareResources")):
        if field_ in body:
            calls = [o for o in mine if o["operation"] == op and not o["skipped"]]
            if len(calls) != body[field_]:
                raise ExpectationFailed(f"claim {_describe(body['claim'])}: {op} called {len(calls)} time(s)",
                                        expected=body[field_], actual=calls)
    for field_, op in (("preparedWith", "NodePrepareResources"), ("unpreparedWith", "NodeUnprepareResources")):
        if field_ in body:  # the kubelet's batching: one call per driver and pod with all its claims
            want = sorted({f"{s.namespace}/{claim_name(s, ref)}" for ref in body[field_]})
            calls = [o for o in mine if o["operation"] == op and not o["skipped"]]
            if not calls:
                raise ExpectationFailed(f"claim {_describe(body['claim'])}: no {op} call", expected=want, actual=[])
            for call in calls:
                got = sorted(call.get("batch") or [call["claim"]])
                if got != want:
                    names = lambda refs: ", ".join(r.split("/", 1)[-1] for r in refs)  # noqa: E731
                    raise ExpectationFailed(f"claim {_describe(body['claim'])}: a {op} call of {call['driver']} carried "
                                            f"{names(got)}; expected {names(want)} in one call",
                                            expected=want, actual=got)


METADATA_GROUP = "metadata.resource.k8s.io"


def _slice_attributes(s: Session) -> dict[tuple[str, str, str], Any]:
    out: dict[tuple[str, str, str], Any] = {}
    for sl in s.list("ResourceSlice"):
        spec = sl.get("spec") or {}
        for dev in spec.get("devices") or []:
            out[(spec.get("driver"), (spec.get("pool") or {}).get("name"), dev.get("name"))] = dev.get("attributes") or {}
    return out


def check_device_metadata(s: Session, body: dict[str, Any]) -> None:
    """The driver's device metadata file for one request of a claim (KEP-5304), read from the node.

    Always checked when the file exists: every document is a DeviceMetadata of the metadata group
    naming this claim (name, namespace, uid), the documents differ only in apiVersion, the one
    request entry is this request, the devices are exactly the request's allocated devices of the
    driver, and their attributes are the ones the driver publishes in its ResourceSlices.
    """
    read = _optional(s, "device_metadata", "device metadata files")
    request = body["request"]
    if body.get("absent"):
        if not isinstance(body["claim"], str) and s.get("Pod", body["claim"]["pod"]) is None:
            raise ExpectationFailed("deviceMetadata absent: the pod is gone, so name the claim itself")
        name = claim_name(s, body["claim"])
        docs = read(name, request, body.get("driver"))
        if docs is not None:
            raise ExpectationFailed(f"claim {_describe(body['claim'])}: a metadata file for request {request} exists",
                                    expected="no file", actual=docs)
        return
    claim = _claim(s, body["claim"])
    results = [r for r in _results(s, body["claim"]) if r.get("request", "").partition("/")[0] == request]
    if not results:
        raise ExpectationFailed(f"claim {_describe(body['claim'])} has no allocated device for request {request}")
    driver = body.get("driver") or results[0]["driver"]
    docs = read(claim["metadata"]["name"], request, driver)
    where = f"claim {_describe(body['claim'])}, request {request}, driver {driver}"
    if docs is None:
        raise ExpectationFailed(f"{where}: the driver wrote no metadata file", expected="a metadata file", actual=None)
    versions = [str(d.get("apiVersion", "")).removeprefix(METADATA_GROUP + "/") for d in docs]
    if "versions" in body and versions != body["versions"]:
        raise ExpectationFailed(f"{where}: the file holds versions {versions}", expected=body["versions"], actual=versions)
    meta = claim["metadata"]
    want_meta = {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta["uid"]}
    ids = sorted({f"{r['pool']}/{r['device']}" for r in results if r["driver"] == driver})
    published = _slice_attributes(s)
    first = None
    for doc, version in zip(docs, versions):
        if doc.get("kind") != "DeviceMetadata" or not str(doc.get("apiVersion", "")).startswith(METADATA_GROUP + "/"):
            raise ExpectationFailed(f"{where}: not a DeviceMetadata document", expected=f"{METADATA_GROUP}/*",
                                    actual={"apiVersion": doc.get("apiVersion"), "kind": doc.get("kind")})
        got_meta = {k: (doc.get("metadata") or {}).get(k) for k in want_meta}
        if got_meta != want_meta or int((doc.get("metadata") or {}).get("generation") or 0) < 1:
            raise ExpectationFailed(f"{where}: the file names another claim", expected=want_meta, actual=doc.get("metadata"))
        body_only = {k: v for k, v in doc.items() if k != "apiVersion"}
        if first is None:
            first = body_only
        elif body_only != first:
            raise ExpectationFailed(f"{where}: the {version} document differs from the first", expected=first, actual=body_only)
    assert first is not None
    reqs = first.get("requests") or []
    if len(reqs) != 1 or str(reqs[0].get("name", "")).partition("/")[0] != request:
        raise ExpectationFailed(f"{where}: the file must hold exactly this request", expected=request,
                                actual=[r.get("name") for r in reqs])
    if "requestName" in body and reqs[0]["name"] != body["requestName"]:
        raise ExpectationFailed(f"{where}: request name {reqs[0]['name']!r}", expected=body["requestName"],
                                actual=reqs[0]["name"])
    if "podClaimName" in body and first.get("podClaimName") != body["podClaimName"]:
        raise ExpectationFailed(f"{where}: podClaimName {first.get('podClaimName')!r}", expected=body["podClaimName"],
                                actual=first.get("podClaimName"))
    devices = reqs[0].get("devices") or []
    listed = sorted(f"{d.get('pool')}/{d.get('name')}" for d in devices)
    if listed != ids:
        raise ExpectationFailed(f"{where}: the file lists other devices than the allocation", expected=ids, actual=listed)
    for d in devices:
        want_attrs = published.get((driver, d.get("pool"), d.get("name")))
        if d.get("driver") != driver or want_attrs is None or d.get("attributes") != want_attrs:
            raise ExpectationFailed(f"{where}: device {d.get('pool')}/{d.get('name')} does not carry the published "
                                    "attributes", expected=want_attrs, actual=d.get("attributes"))
    if "devices" in body:
        problems = mismatches(body["devices"], devices, "unordered", ("devices",))
        if problems:
            raise ExpectationFailed(f"{where}: " + "; ".join(problems), expected=body["devices"], actual=devices)


def check_container(s: Session, body: dict[str, Any]) -> None:
    """What the node's container runtime gave a container: the CDI device IDs the kubelet passed
    and the env, mounts and device nodes they resolve to (the fake CRI's record on a real kubelet
    node; the reference's kubelet part computes the same). Always checked: every CDI ID resolved
    and none is passed twice."""
    import fnmatch

    pod = body["pod"]
    read = _optional(s, "container", "what a container runtime gave a container")
    name = body.get("container")
    if name is None:
        spec = (s.get("Pod", pod) or {}).get("spec") or {}
        containers = spec.get("containers") or []
        if not containers:
            raise ExpectationFailed(f"pod {pod} has no containers to look at")
        name = containers[0]["name"]
    got = read(pod, name)
    where = f"container {name} of pod {pod}"
    if body.get("absent"):
        if got is not None:
            raise ExpectationFailed(f"{where} was created", expected="no container", actual=got)
        return
    if got is None:
        raise ExpectationFailed(f"{where} was never created by the runtime", expected="a container", actual=None)
    if got.get("error"):
        raise ExpectationFailed(f"{where}: the runtime refused it: {got['error']}", actual=got["cdiDevices"])
    ids = got["cdiDevices"]
    if len(set(ids)) != len(ids):
        raise ExpectationFailed(f"{where}: a CDI device ID was passed twice", actual=ids)
    if "cdiDevices" in body and len(ids) != body["cdiDevices"]:
        raise ExpectationFailed(f"{where}: {len(ids)} CDI devices", expected=body["cdiDevices"], actual=ids)
    env = got["env"]
    for want in body.get("env") or []:
        if not any(fnmatch.fnmatchcase(kv, want if "=" in want else want + "=*") for kv in env):
            raise ExpectationFailed(f"{where}: no env variable {want}", expected=want, actual=env)
    for absent in body.get("envAbsent") or []:
        if any(kv.partition("=")[0] == absent for kv in env):
            raise ExpectationFailed(f"{where}: env variable {absent} is set", expected="absent", actual=env)
    for key in ("mounts", "deviceNodes"):
        if key in body:
            problems = mismatches(body[key], got[key], "subset", (key,))
            if problems:
                raise ExpectationFailed(f"{where}: " + "; ".join(problems), expected=body[key], actual=got[key])


NODE_CHECKS: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "nodeOperations": check_node_operations,
    "deviceMetadata": check_device_metadata,
    "container": check_container,
}
