"""What the driver, the node agent and the control plane said while one cluster case ran, for
the diagnostics attached to a failed case.

- :class:`CaseLog` collects the log records of drakit's own components (``drakit.*`` loggers:
  the fake driver's plugins and API side, the node agent) from the moment a case opens; the
  newest ``limit`` lines are kept.
- :func:`control_plane_lines` reads the local control plane's component logs (scheduler,
  controller manager, kwok) and keeps the lines that mention the case's namespace.

Log text never carries credentials: components log object names, not tokens or certificates.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from pathlib import Path

COMPONENTS = ("kube-scheduler", "kube-controller-manager", "kwok")


class CaseLog(logging.Handler):
    def __init__(self, limit: int = 200) -> None:
        super().__init__(logging.INFO)
        self.lines: deque[str] = deque(maxlen=limit)
        self._guard = threading.Lock()
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._logger = logging.getLogger("drakit")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # noqa: BLE001 - a bad log call must not break the case
            line = f"{record.name}: {record.msg!r}"
        with self._guard:
            self.lines.append(line)

    def __enter__(self) -> CaseLog:
        self._logger.addHandler(self)
        if self._logger.level == logging.NOTSET or self._logger.level > logging.INFO:
            self._saved_level: int | None = self._logger.level
            self._logger.setLevel(logging.INFO)
        else:
            self._saved_level = None
        return self

    def close(self) -> None:
        self._logger.removeHandler(self)
        if getattr(self, "_saved_level", None) is not None:
            self._logger.setLevel(self._saved_level)  # type: ignore[arg-type]
            self._saved_level = None
        super().close()

    def snapshot(self) -> list[str]:
        with self._guard:
            return list(self.lines)


def control_plane_lines(logs_dir: Path | None, namespace: str, limit: int = 100) -> dict[str, list[str]]:
    """Per component, the last ``limit`` log lines that mention ``namespace``."""
    out: dict[str, list[str]] = {}
    if logs_dir is None:
        return out
    for name in COMPONENTS:
        path = logs_dir / f"{name}.log"
        try:
            with path.open(encoding="utf-8", errors="replace") as f:
                found: deque[str] = deque((line.rstrip("\n") for line in f if namespace in line), maxlen=limit)
        except OSError:
            continue
        if found:
            out[name] = list(found)
    return out
