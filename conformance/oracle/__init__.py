"""The upstream allocator as an oracle: a small Go program built from the Go module proxy.

``main.go`` next to this file imports ``k8s.io/dynamic-resource-allocation`` v0.37.2 (the
structured allocator the 1.37 kube-scheduler runs) and answers JSON lines with upstream's
allocation for the same inputs our reference allocator takes. :func:`build_oracle` compiles it
once into a cache directory outside the repository; :class:`Oracle` keeps one process open and
feeds it a batch, so thousands of inputs cost one process start.

This module does I/O (subprocess, files): it is test and benchmark tooling, not the pure core.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

HERE = Path(__file__).resolve().parent
MIN_GO = (1, 26)

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class GoProgram:
    """One of the oracles: a Go main package in a folder of this package, with its own module."""

    name: str                   # the cache subdirectory and the binary's name
    folder: Path
    sources: tuple[str, ...]
    what: str                   # for progress lines: what it is built from
    tags: str = ""


ALLOCATOR = GoProgram("oracle", HERE, ("go.mod", "go.sum", "main.go"), "k8s.io/dynamic-resource-allocation")
ADMISSION = GoProgram("admission-oracle", HERE / "admission", ("go.mod", "go.sum", "main.go"),
                      "k8s.io/kubernetes v1.37.2 (the API server's registry strategies)", tags="selinux,notest,grpcnotrace")
SOURCES = ALLOCATOR.sources
BINARY = "drakit-oracle"


class OracleUnavailable(Exception):
    """No Go toolchain (or too old, or the build failed): callers skip, with this message."""


class OracleError(Exception):
    """The oracle process died or answered something that is not a response."""


def source_hash(program: GoProgram = ALLOCATOR) -> str:
    """Hash of a program's Go sources (go.mod, go.sum, main.go): names its cache directory."""
    h = hashlib.sha256()
    for name in program.sources:
        h.update(name.encode() + b"\0" + (program.folder / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir(program: GoProgram = ALLOCATOR) -> Path:
    """``$DRAKIT_CACHE/<name>/<hash>`` or ``${XDG_CACHE_HOME:-~/.cache}/drakit/<name>/<hash>``."""
    base = os.environ.get("DRAKIT_CACHE")
    if base:
        root = Path(base).expanduser()
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "drakit"
    return root / program.name / source_hash(program)


def find_go() -> str:
    """Path of a ``go`` command of at least :data:`MIN_GO`, else :class:`OracleUnavailable`."""
    go = shutil.which("go")
    if go is None:
        raise OracleUnavailable("no Go toolchain on PATH: the upstream oracle needs Go "
                                f"{MIN_GO[0]}.{MIN_GO[1]}+ (https://go.dev/dl/) and the Go module proxy")
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise OracleUnavailable(f"{go} does not run: {exc}") from None
    m = re.match(r"go(\d+)\.(\d+)", out.strip())
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_GO:
        raise OracleUnavailable(f"{go} is {out.strip() or 'of unknown version'}; the upstream oracle needs "
                                f"Go {MIN_GO[0]}.{MIN_GO[1]}+")
    return go


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")
    env["CGO_ENABLED"] = "0"
    # The committed go.sum must be complete: never let the build rewrite go.mod/go.sum.
    flags = [f for f in env.get("GOFLAGS", "").split() if not f.startswith(("-mod=", "-buildvcs"))]
    env["GOFLAGS"] = " ".join(flags + ["-mod=readonly", "-buildvcs=false"])
    return env


def binary_path(program: GoProgram = ALLOCATOR) -> Path:
    return cache_dir(program) / (BINARY if program is ALLOCATOR else program.name)


def build_program(program: GoProgram, progress: Progress | None = None) -> Path:
    """Build ``program`` unless a binary for its current sources is cached; return its path.

    Safe to call from several processes at once (pytest-xdist workers): the build runs under a
    lock file and the binary appears atomically.
    """
    binary = binary_path(program)
    out = binary.parent
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    go = find_go()
    out.mkdir(parents=True, exist_ok=True)
    import fcntl
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        if progress:
            progress(f"building the {program.name} ({program.what}) into {out}")
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            target = Path(tmp) / binary.name
            cmd = [go, "build", "-trimpath", *(["-tags", program.tags] if program.tags else []),
                   "-ldflags", "-s -w", "-o", str(target), "."]
            proc = subprocess.run(cmd, cwd=program.folder, env=_go_env(), capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                detail = (proc.stderr or proc.stdout).strip().splitlines()
                tail = "\n".join(detail[-15:])
                raise OracleUnavailable(f"building the {program.name} failed (go build in {program.folder}):\n{tail}")
            os.replace(target, binary)
        (out / "build.json").write_text(json.dumps({"seconds": round(time.monotonic() - t0, 1),
                                                    "sources": source_hash(program)}) + "\n")
    return binary


def build_oracle(progress: Progress | None = None) -> Path:
    """The allocator oracle's binary (built on first use)."""
    return build_program(ALLOCATOR, progress)


def build_admission_oracle(progress: Progress | None = None) -> Path:
    """The admission oracle's binary (built on first use; ``drakit cluster build`` builds it too)."""
    return build_program(ADMISSION, progress)


class Oracle:
    """One oracle process; requests are answered in order.

    >>> with Oracle() as o:                                     # doctest: +SKIP
    ...     answer = o.run({"features": {...}, "node": {"name": "n1"}, "classes": [...], ...})
    """

    def __init__(self, binary: Path | None = None) -> None:
        self.binary = binary or build_oracle()
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([str(self.binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, bufsize=1 << 20)
        return self._proc

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request, one answer."""
        return next(self.run_many([request]))

    def run_many(self, requests: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Stream a batch: a writer thread feeds stdin while answers are read, so large batches
        never dead-lock on full pipes."""
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            cond = threading.Condition()
            state = {"sent": 0, "done": False}
            failure: list[BaseException] = []

            def feed() -> None:
                try:
                    for r in requests:
                        proc.stdin.write(json.dumps(r, separators=(",", ":")) + "\n")  # type: ignore[union-attr]
                        proc.stdin.flush()  # type: ignore[union-attr]
                        with cond:
                            state["sent"] += 1
                            cond.notify()
                except BaseException as exc:  # noqa: BLE001 - reported to the reader
                    failure.append(exc)
                finally:
                    with cond:
                        state["done"] = True
                        cond.notify()

            writer = threading.Thread(target=feed, daemon=True)
            writer.start()
            read = 0
            while True:
                with cond:
                    while read >= state["sent"] and not state["done"]:
                        cond.wait()
                    if read >= state["sent"]:
                        break
                line = proc.stdout.readline()
                if not line:
                    err = proc.stderr.read() if proc.stderr else ""
                    raise OracleError(f"the oracle exited (code {proc.poll()}): {err.strip()[-2000:]}")
                read += 1
                try:
                    yield json.loads(line)
                except ValueError:
                    raise OracleError(f"the oracle answered something that is not JSON: {line[:200]!r}") from None
            writer.join()
            if failure:
                raise OracleError(f"could not feed the oracle: {failure[0]}")

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            for stream in (self._proc.stdout, self._proc.stderr):
                if stream:
                    stream.close()
            self._proc = None

    def __enter__(self) -> "Oracle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ADMISSION", "ALLOCATOR", "GoProgram", "Oracle", "OracleError", "OracleUnavailable", "binary_path", "build_admission_oracle",
           "build_oracle", "build_program", "cache_dir", "find_go", "source_hash"]
