"""The driver's own output as evidence: where its logs go, and the lines of one case's window.

The plugin of each driver node and the profile's controller write to ``<out>/driver-logs/``
(``--out`` of ``drakit run``; a worker's files carry its id), which stays after the run. When a
driver case fails or errors, its diagnostics carry ``driverLog``: the lines every one of those
files gained while the case ran (from where each file stood when the case began), the error
lines first, then the newest of the others, each prefixed with its file's name.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

# klog's E/F lines, logfmt and JSON levels, Go panics, and plain words
_ERROR = re.compile(r'^[EF]\d{4} |level=(error|fatal)|"level":\s*"(error|fatal)"|\bpanic\b|\b(error|failed|fatal)\b',
                    re.I)


class DriverLogs:
    def __init__(self, out: Path | None) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if out is None:
            self.dir = Path(tempfile.mkdtemp(prefix="drakit-driver-logs-"))
        else:  # made under --out without following a link (drakit.reports.safefs)
            from drakit.reports.safefs import make_subdir
            self.dir = make_subdir(Path(out), "driver-logs", "--out")
            if worker:
                self.dir = make_subdir(self.dir, worker, "--out")
        self._paths: list[Path] = []

    def path(self, name: str) -> Path:
        from drakit.reports.safefs import check_name
        p = self.dir / check_name(f"{name}.log", "log file name")  # a configuration's name: never a path
        if p not in self._paths:
            self._paths.append(p)
        return p

    def files(self) -> list[str]:
        return [str(p) for p in self._paths if p.exists()]

    def marks(self) -> dict[str, int]:
        """Where each log stands now: a case's window starts here."""
        out = {}
        for p in self._paths:
            try:
                out[str(p)] = p.stat().st_size
            except OSError:
                out[str(p)] = 0
        return out

    def window(self, marks: dict[str, int], limit: int = 60) -> dict[str, Any]:
        """The lines the logs gained since ``marks``: errors first, then the newest others."""
        errors: list[str] = []
        others: list[str] = []
        for p in self._paths:
            try:
                with p.open("rb") as fh:
                    fh.seek(marks.get(str(p), 0))
                    text = fh.read(4 << 20).decode(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                if not line.strip() or line.startswith("# "):  # drakit's own command line header
                    continue
                shown = f"{p.stem}: {line[:400]}"
                (errors if _ERROR.search(line) else others).append(shown)
        lines = errors[:limit] + others[-max(limit - len(errors), 10):]
        return {"files": self.files(), "errors": len(errors), "lines": lines}
