"""What profile init reads from and does on a cluster where the driver runs (cluster I/O).

:func:`read_objects`: the ResourceSlices and DeviceClasses. :func:`probe` (where pods can run): in
a namespace of its own, claims of one device and of two devices of the driver's class and one with
a prioritized list, a pod for each that prints its environment (as the driver suite's pods do) and
one without a claim, then what each container got, the claims' allocations and status, the pods'
device health; the namespace is deleted at the end, waiting until its pods are gone (the kubelet
lets a pod go only once the driver unprepared its claims).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .envgen import Observation

POD_IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
REQUEST = "probereq"
PRINT_ENV = "trap 'exit 0' TERM; tr '\\0' '\\n' </proc/$$$$/environ; sleep 3600 & wait"
# claim name -> its one request (exactly, or firstAvailable)
_CLAIMS: dict[str, dict[str, Any]] = {
    "probe-one": {"exactly": {"count": 1}},
    "probe-two": {"exactly": {"count": 2}},
    "probe-list": {"firstAvailable": [{"name": "never", "selectors": [{"cel": {"expression": "false"}}]}, {"name": "any"}]},
}


@dataclass
class ProbeResult:
    observations: list[Observation] = field(default_factory=list)
    observed: list[tuple[str, str]] = field(default_factory=list)  # (optional behaviour, why)
    notes: list[str] = field(default_factory=list)


def read_objects(api: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return api.list("ResourceSlice", None), api.list("DeviceClass", None)


def _claim(name: str, class_name: str) -> dict[str, Any]:
    spec = _CLAIMS[name]
    if "exactly" in spec:
        request = {"name": REQUEST, "exactly": {"deviceClassName": class_name, **spec["exactly"]}}
    else:
        request = {"name": REQUEST, "firstAvailable": [{"deviceClassName": class_name, **sub} for sub in spec["firstAvailable"]]}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [request]}}}


def _pod(name: str, claim: str | None, image: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image, "command": ["sh", "-c", PRINT_ENV]}
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 1}
    if claim:
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim}]
        container["resources"] = {"claims": [{"name": "dev"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def probe(api: Any, driver: str, class_name: str, env_reader: Callable[[str, str], dict[str, str] | None],
          *, image: str = POD_IMAGE, timeout: float = 120.0, say: Callable[[str], None] = lambda _: None,
          metadata: Callable[[str, str, str], bool] | None = None) -> ProbeResult:
    """``env_reader(namespace, pod)``: what the pod's container got (None while nothing yet);
    ``metadata(namespace, pod, claim)``: whether its container got the driver's device metadata
    file for the claim (on nodes drakit runs, which record what a container got)."""
    from drakit.fake_driver.envtemplate import values_for
    ns = f"drakit-profile-init-{secrets.token_hex(3)}"
    out = ProbeResult()
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"drakit.dev/profile-init": "true"}}})
    try:
        for name in _CLAIMS:
            api.create({**_claim(name, class_name), "metadata": {"name": name, "namespace": ns}})
        pods = {"plain": None, **{f"pod-{c.removeprefix('probe-')}": c for c in _CLAIMS}}
        for pod, claim in pods.items():
            obj = _pod(pod, claim, image)
            obj["metadata"]["namespace"] = ns
            api.create(obj)
        say(f"probe: {len(pods)} pods in namespace {ns} (one device, two devices, a prioritized list, none)")
        envs = _wait_envs(api, ns, list(pods), env_reader, timeout)
        baseline = envs.get("plain")
        if baseline is None:
            out.notes.append(f"the pod without a claim did not run within {timeout:.0f} s: {_why(api, ns, 'plain')}")
            return out
        for pod, claim in pods.items():
            if claim is None:
                continue
            obj = api.get("ResourceClaim", claim, ns) or {}
            results = [r for r in ((obj.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
                       if r.get("driver") == driver]
            env = envs.get(pod)
            if env is None or not results:
                out.notes.append(f"pod {pod} (claim {claim}) did not run within {timeout:.0f} s: {_why(api, ns, pod)}")
                continue
            node = str(((api.get("Pod", pod, ns) or {}).get("spec") or {}).get("nodeName") or "")
            added = {k: v for k, v in env.items() if k not in baseline and not k.startswith("=")}
            out.observations.append(Observation(added, [values_for(r, obj, node) for r in results]))
            if claim == "probe-list":
                out.observed.append(("prioritized-list", "a claim with firstAvailable subrequests got a device and its pod ran"))
            if (obj.get("status") or {}).get("devices") and not any(b == "device-status" for b, _ in out.observed):
                out.observed.append(("device-status", f"it wrote status.devices into claim {claim}"))
            if metadata is not None and metadata(ns, pod, claim) and not any(b == "device-metadata" for b, _ in out.observed):
                out.observed.append(("device-metadata", f"pod {pod}'s container got its device metadata file for claim {claim}"))
            if _health(api.get("Pod", pod, ns)) and not any(b == "health" for b, _ in out.observed):
                out.observed.append(("health", f"pod {pod}'s status shows the health of its devices"))
        return out
    finally:
        _delete(api, ns)


def _wait_envs(api: Any, ns: str, pods: list[str], reader: Callable[[str, str], dict[str, str] | None],
               timeout: float) -> dict[str, dict[str, str]]:
    """Each running pod's environment; an empty one is taken once the pod has run 5 s (a
    runtime that records what a container got may record no variable at all)."""
    got: dict[str, dict[str, str]] = {}
    running: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < len(pods):
        for pod in pods:
            if pod in got:
                continue
            phase = ((api.get("Pod", pod, ns) or {}).get("status") or {}).get("phase")
            if phase in ("Running", "Succeeded"):
                since = running.setdefault(pod, time.monotonic())
                env = reader(ns, pod)
                if env is not None and (env or time.monotonic() - since > 5):
                    got[pod] = env
        time.sleep(0.5)
    return got


def _why(api: Any, ns: str, pod: str) -> str:
    obj = api.get("Pod", pod, ns) or {}
    st = obj.get("status") or {}
    for c in st.get("conditions") or []:
        if c.get("status") == "False" and c.get("message"):
            return str(c["message"])[:300]
    return f"phase {st.get('phase', 'unknown')}"


def _health(pod: Any) -> bool:
    for c in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        for r in c.get("allocatedResourcesStatus") or []:
            # Unknown is what the kubelet shows for a driver that streams no health
            if any(x.get("health") in ("Healthy", "Unhealthy") for x in r.get("resources") or []):
                return True
    return False


def _delete(api: Any, ns: str, timeout: float = 60.0) -> None:
    for pod in api.list("Pod", ns):
        api.delete("Pod", pod["metadata"]["name"], ns, grace=1)
    deadline = time.monotonic() + timeout
    while api.list("Pod", ns) and time.monotonic() < deadline:
        time.sleep(0.5)
    api.delete("Namespace", ns, None)
