"""JSON or YAML files drakit reads but did not write (what a driver under test writes: CDI specs),
read by the one reader (:mod:`drakit.conformance.inputs`) and parsed bounded (JSON without
duplicate keys, YAML by :mod:`drakit.conformance.yamlmarks`). An edge module: the pure core
parses text and reads no file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .inputs import Kind, parse_json, read_text
from .yamlmarks import load_documents


def read_document(path: str | os.PathLike[str], kind: Kind) -> Any:
    """The first document of a JSON (``*.json``) or YAML file, within the limits of *kind*;
    ``None`` for an empty file. :class:`~drakit.conformance.inputs.InputError` or
    :class:`~drakit.conformance.errors.LoadError` otherwise."""
    text = read_text(path, kind)
    if Path(path).suffix == ".json":
        return parse_json(text, os.fspath(path))
    return next((doc for _, doc in load_documents(text, os.fspath(path))), None)
