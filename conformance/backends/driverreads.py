"""What drakit reads of a driver on its nodes, as plain functions: the environment its CDI specs
give a device (what a CDI-aware runtime resolves) and the version its plugin says it was built
as (a ``*_build_info`` metric). Used by :mod:`.drivernodes`."""

from __future__ import annotations

from pathlib import Path


def cdi_env(folder: Path) -> dict[str, list[str]]:
    """CDI device id -> the env entries its spec gives (spec-wide edits first), for the JSON and
    YAML specs in ``folder`` (what a CDI-aware runtime resolves; node-check validates the specs)."""
    from ..errors import LoadError
    from ..inputs import DRIVER_FILE, InputError
    from ..datafiles import read_document
    out: dict[str, list[str]] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".json", ".yaml", ".yml"):
            continue
        try:  # drakit's one reader and bounded parsers: the driver wrote it
            doc = read_document(path, DRIVER_FILE)
        except (InputError, LoadError):
            continue
        if not isinstance(doc, dict):
            continue
        common = [str(e) for e in (doc.get("containerEdits") or {}).get("env") or []]
        for device in doc.get("devices") or []:
            own = [str(e) for e in (device.get("containerEdits") or {}).get("env") or []]
            out[f"{doc.get('kind')}={device.get('name')}"] = common + own
    return out


def build_version(url: str) -> dict[str, str]:
    """``{buildVersion, buildVersionSource}`` from the first ``*_build_info`` metric at ``url``
    carrying ``git_version`` or ``version`` (``kubernetes_build_info`` of a component-base
    binary), or ``{buildVersionError}``."""
    import re
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - a local plugin's endpoint
            text = reply.read(1 << 20).decode(errors="replace")
    except OSError as exc:
        return {"buildVersionError": f"{url}: {exc}"}
    for m in re.finditer(r"^(\w+_build_info)\{([^}]*)\}", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        version = labels.get("git_version") or labels.get("version")
        if version:
            return {"buildVersion": version, "buildVersionSource": f"{m.group(1)} on its metrics endpoint"}
    return {"buildVersionError": f"{url}: no *_build_info metric with a version label"}
