"""The pytest plugin's folder collector: the folders of a run are walked by the rule of
:mod:`~drakit.conformance.cases.finder` (the one ``drakit lint`` uses): every ``*.case.yaml``
entry that is not a folder is collected, a FIFO or a dangling symlink included (the loader
reports it as a load error, so the run cannot pass over it in silence), and each real folder is
entered once (a symlink cycle is not followed around)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import pytest

from .cases.finder import folder_key, is_case_entry, is_file, is_folder

SEEN = pytest.StashKey[dict[tuple[int, int], Path]]()  # real folder -> the path it was first collected under


class CaseDir(pytest.Dir):
    """``pytest.Dir`` with the finder's rule; the other files of the folder are offered to
    pytest's hooks as ``Dir`` does (this plugin is loaded in every pytest session)."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        # pytest collects a folder again for each file given in it (drakit run a/x.case.yaml
        # a/y.case.yaml): the same path is collected each time; the same real folder under
        # another path (a symlink, a cycle) is not
        seen = self.session.stash.setdefault(SEEN, {})
        key = folder_key(self.path)
        if key is not None and seen.setdefault(key, self.path) != self.path:
            return
        ihook, config = self.ihook, self.config
        try:
            entries = sorted(os.scandir(self.path), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = Path(entry.path)
            if is_folder(entry):
                if not self.session.isinitpath(path, with_parents=True) and ihook.pytest_ignore_collect(
                        collection_path=path, config=config):
                    continue
                col = ihook.pytest_collect_directory(path=path, parent=self)
                if col is not None:
                    yield col
            elif is_file(entry) or is_case_entry(entry):
                if not self.session.isinitpath(path) and ihook.pytest_ignore_collect(collection_path=path, config=config):
                    continue
                yield from ihook.pytest_collect_file(file_path=path, parent=self)


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    try:
        if (path / "__init__.py").is_file():  # a Python package: pytest's own collector
            return None
    except OSError:
        return None
    return CaseDir.from_parent(parent, path=path)
