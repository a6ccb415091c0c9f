"""Which files of a folder are case files: one rule for ``drakit run`` (through the pytest
plugin's folder collector) and ``drakit lint``.

- every entry named ``*.case.yaml`` that is not a folder is a case file, whatever it is: a FIFO,
  a socket, a device, a dangling or looping symlink reaches the loader, which reports it as a
  load error naming it (never skipped without a word, never waited on);
- a folder is entered once: a symlinked folder is followed the first time its real folder is
  met and passed over after that (a link cycle is not walked around, a folder linked twice is
  not loaded twice).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator

SUFFIX = ".case.yaml"


def folder_key(path: Path) -> tuple[int, int] | None:
    """The identity of the real folder at *path* (None: not a folder one can stat)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows a symlink; False when it dangles
    except OSError:  # a symlink loop, a permission problem: not a folder to enter
        return False


def is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a symlink loop
        return False


def is_case_entry(entry: os.DirEntry[str]) -> bool:
    """A case file as a folder listing shows it: named ``*.case.yaml``, not a folder."""
    return entry.name.endswith(SUFFIX) and not is_folder(entry)


class Seen:
    """The real folders entered so far in one walk."""

    def __init__(self) -> None:
        self._keys: set[tuple[int, int]] = set()

    def first_visit(self, path: Path) -> bool:
        """True the first time the real folder of *path* is met (and remember it)."""
        key = folder_key(path)
        if key is None:
            return True
        if key in self._keys:
            return False
        self._keys.add(key)
        return True


def _walk(folder: Path, seen: Seen) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if is_folder(entry):
            sub = Path(entry.path)
            if seen.first_visit(sub):
                yield from _walk(sub, seen)
        elif entry.name.endswith(SUFFIX):
            yield Path(entry.path)


def find_case_files(paths: Iterable[Path]) -> list[Path]:
    """Every case file under *paths*, in a stable order; a path that is not a folder is taken as
    given, whatever it is."""
    seen = Seen()
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            if seen.first_visit(p):
                found.extend(_walk(p, seen))
        else:
            found.append(p)
    return sorted(set(found))
