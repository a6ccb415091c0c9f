"""The cases of ``drakit node-check``: id, title, features, profile, what each checks.

``required`` cases decide the exit code; an ``optional`` case that fails is a *finding*: good to
know, allowed by the kubelet's contract (e.g. a driver that trusts the scheduler's allocation
and prepares a device it does not have).
"""

from __future__ import annotations

# (id, title, features, profile, description)
CASES: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("node/registration", "Registration info is valid", ("core",), "required",
     "GetInfo answers within 1 s with type DRAPlugin, the driver name, an existing socket as "
     "endpoint and a DRA service the kubelet speaks; NotifyRegistrationStatus is accepted."),
    ("node/unprepare-unknown-claim", "Unprepare of an unknown claim succeeds", ("core",), "required",
     "Every advertised DRA service answers NodeUnprepareResources for a claim it never saw with "
     "an entry for that claim and no error."),
    ("node/prepare-missing-claim", "Prepare of a claim that does not exist fails", ("core",), "required",
     "NodePrepareResources for a claim the API does not have must not succeed: a per-claim error "
     "or a failed call are both allowed (the kubelet ignores the answer of a failed call, and never "
     "sends a claim it could not fetch)."),
    ("node/prepare-batch", "Several claims in one call are all answered", ("core",), "required",
     "Two claims of disjoint devices in one call both get their devices, and one unprepare call "
     "releases both; a call mixing a good and a missing claim either fails as a whole or answers "
     "both (devices for the good one, an error for the other)."),
    ("node/prepare-devices", "Prepare returns CDI ids for exactly the allocated devices", ("core",),
     "required", "For every claim: one answer entry, no error, the allocated devices of this driver "
     "(pool and name) and no others, base request names, well-formed CDI ids, share IDs."),
    ("node/cdi-specs", "CDI spec files parse and define every returned CDI id", ("core",),
     "required", "While a claim is prepared, each CDI id resolves to exactly one device in a valid "
     "spec file (cdiVersion high enough for its content) in the CDI folders."),
    ("node/prepare-idempotent", "Prepare twice gives the same answer", ("core",), "required",
     "A second NodePrepareResources for a prepared claim returns the same devices and CDI ids."),
    ("node/prepare-concurrent", "Concurrent prepares of different claims all succeed", ("core",),
     "required", "Claims with disjoint devices, prepared in parallel calls, all succeed correctly; "
     "so do the parallel unprepares."),
    ("node/prepare-unknown-device", "A device the driver does not have is refused", ("core",),
     "optional", "Claims annotated drakit.dev/node-check-expect=error (e.g. naming a device the "
     "driver does not publish) get an error. The kubelet's contract lets a driver trust the "
     "allocation, so a driver that prepares such a claim is a finding, not a failure."),
    ("node/unprepare-cleanup", "Unprepare removes the claim's transient CDI devices", ("core",),
     "optional", "After unprepare, no CDI device whose name contains the claim UID is left."),
    ("node/dra-v1beta1", "The v1beta1 service prepares like v1", ("core",), "optional",
     "When both are advertised, v1beta1 returns the same devices and CDI ids as v1."),
    ("node/device-metadata", "Device metadata files parse and name the allocated devices",
     ("device-metadata",), "required",
     "Metadata CDI ids (<driver>/metadata=<claimUID>_<request>) mount, read-only at the documented "
     "container path, a JSON stream with a v1beta1 DeviceMetadata object naming the claim and "
     "exactly the request's allocated devices."),
    ("node/health-stream", "The health stream sends a complete device list", ("device-status",),
     "optional", "Each advertised health service sends a first message promptly; entries name a "
     "pool and device, use a known health value and keep messages within 1024 characters."),
)
