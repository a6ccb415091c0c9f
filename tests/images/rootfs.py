"""Open an image archive the way a runtime does (its layers applied in order into one folder)
and run a command in it: a private mount and PID namespace with /proc and /dev, chroot, a
clean environment from the image's config. Root only (chroot)."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def unpack(archive: Path, dest: Path) -> dict[str, Any]:
    """Apply the image's layers into ``dest``; returns its config."""
    with tarfile.open(archive) as tar:
        def blob(digest: str) -> Any:
            f = tar.extractfile(f"blobs/sha256/{digest.split(':')[1]}")
            assert f is not None
            return f

        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|gz") as lt:
                lt.extractall(dest, filter="fully_trusted")
        config: dict[str, Any] = json.load(blob(manifest["config"]["digest"]))
    dest.chmod(0o755)  # the root of a container's file system, whatever the test's folder had
    return config


def run(root: Path, config: dict[str, Any], argv: Sequence[str], *, user: str | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (the image's entrypoint is not prepended) as the image's user in ``root``."""
    cfg = config["config"]
    user = user or cfg.get("User") or "0:0"
    env = [*cfg.get("Env", []), "HOME=/tmp"]
    inner = (f'mount --rbind /dev "{root}/dev" && cd "{root}" && exec chroot --userspec={user} "{root}" '
             f'env -i {" ".join(env)} "$@"')
    return subprocess.run(["unshare", "--mount", "--pid", "--fork", f"--mount-proc={root}/proc", "sh", "-c", inner, "sh",
                           *argv], capture_output=True, text=True, timeout=timeout, check=False, cwd="/",
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
