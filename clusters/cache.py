"""Where drakit keeps what it builds (binaries, images, drivers): one root for every provider."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """drakit's cache: ``$DRAKIT_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/drakit``."""
    base = os.environ.get("DRAKIT_CACHE")
    if base:
        return Path(base).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "drakit"
