"""YAML loading that remembers where every value came from.

Mappings load as :class:`MarkedDict` and sequences as :class:`MarkedList`; both are plain
``dict``/``list`` subclasses with a ``marks`` table of 1-based line numbers, so the rest of the
kit can treat them as ordinary data and still point a user at ``file:line``. Duplicate keys are
an error (a silently overwritten key is a lost expectation).
"""

from __future__ import annotations

from typing import Any, Iterator

import yaml

from .errors import LoadError


class MarkedDict(dict):  # type: ignore[type-arg]
    __slots__ = ("line", "marks")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.line: int | None = None
        self.marks: dict[Any, int] = {}


class MarkedList(list):  # type: ignore[type-arg]
    __slots__ = ("line", "marks")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.line: int | None = None
        self.marks: list[int] = []


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> MarkedDict:
    loader.flatten_mapping(node)
    out = MarkedDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) or key is None:
            raise yaml.constructor.ConstructorError(
                None, None, f"unsupported mapping key {key!r}", key_node.start_mark)
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        out[key] = loader.construct_object(value_node, deep=True)
        out.marks[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> MarkedList:
    out = MarkedList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.marks = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def _yaml_error(file: str, exc: yaml.YAMLError) -> LoadError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    msg = f"YAML: {context} {problem}" if context and problem else f"YAML: {problem}"
    return LoadError(file, line, msg.replace("\n", " "))


def load_documents(text: str, file: str) -> Iterator[tuple[int, Any]]:
    """Yield (start line, document) for every non-empty document; raise LoadError on bad YAML."""
    try:
        loader = _Loader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    continue
                start = node.start_mark.line + 1
                yield start, loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _yaml_error(file, exc) from None


def line_of(doc: Any, path: tuple[object, ...]) -> int | None:
    """The line of the deepest value on ``path`` that carries a mark."""
    best = getattr(doc, "line", None)
    node = doc
    for part in path:
        if isinstance(node, MarkedDict) and part in node:
            best = node.marks.get(part, best)
            node = node[part]
        elif isinstance(node, MarkedList) and isinstance(part, int) and 0 <= part < len(node):
            best = node.marks[part]
            node = node[part]
        else:
            break
        inner = getattr(node, "line", None)
        if inner is not None and not isinstance(node, MarkedList):
            best = best if best is not None else inner
    return best
