"""YAML loading that remembers where every value came from.

Mappings load as :class:`MarkedDict` and sequences as :class:`MarkedList`; both are plain
``dict``/``list`` subclasses with a ``marks`` table of 1-based line numbers, so the rest of the
kit can treat them as ordinary data and still point a user at ``file:line``. Duplicate keys are
an error (a silently overwritten key is a lost expectation).

Hostile input is refused while parsing, before anything grows, the way the API server bounds a
request: :class:`YamlLimits` caps the nesting depth, the nodes of a file and the nodes that
aliases add when expanded (an "alias bomb" of nine nested anchors is billions of nodes), both counted by the
composer as it builds each node, so the refusal costs no more than the text that led to it.
Tags beyond JSON's data (``!!set``, ``!!binary``...) are refused and timestamps stay strings, as
Kubernetes reads them. libyaml's parser is used when PyYAML has it (about 3x faster); the
composer is always this one, so the limits hold either way.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterator

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.resolver import Resolver

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


_ATOMS = frozenset({str, int, float, bool, type(None)})


def copy_tree(obj: Any) -> Any:
    """A deep copy of a tree of dicts and lists as loaded from YAML or JSON (marks kept), several
    times faster than ``copy.deepcopy``, which it falls back to for anything else (and for a
    tree too deep or with a cycle)."""
    try:
        return _copy(obj)
    except RecursionError:
        return copy.deepcopy(obj)


def _copy(obj: Any) -> Any:
    kind = type(obj)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else _copy(v) for k, v in obj.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else _copy(v) for v in obj]
    if kind in _ATOMS:
        return obj
    if kind is MarkedDict:
        marked = MarkedDict({k: v if type(v) in _ATOMS else _copy(v) for k, v in obj.items()})
        marked.line, marked.marks = obj.line, dict(obj.marks)
        return marked
    if kind is MarkedList:
        items = MarkedList([v if type(v) in _ATOMS else _copy(v) for v in obj])
        items.line, items.marks = obj.line, list(obj.marks)
        return items
    return copy.deepcopy(obj)


@dataclass(frozen=True)
class YamlLimits:
    """Bounds on one YAML file, checked while it is composed."""

    max_depth: int = 100  # nested mappings and sequences (the bundled suites use 16)
    max_alias_nodes: int = 100_000  # nodes all alias references of the file add when expanded
    max_nodes: int = 1_000_000  # nodes of a file (about 600 bytes of memory each while composed: under 1 GiB)


DEFAULT_LIMITS = YamlLimits()


class _LimitedComposer(Composer):
    """PyYAML's composer, counting as it goes: the depth of every node (aliases included at
    their expanded depth) and the nodes that alias references add."""

    limits = DEFAULT_LIMITS

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._alias_nodes = 0
        self._nodes = 0
        self._size: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, height), until its parent is done
        self._anchored: set[int] = set()  # id(node) of the nodes an alias may name: their sizes are kept

    def compose_document(self) -> Node:
        try:
            return super().compose_document()
        finally:
            self._size, self._anchored = {}, set()

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if self.check_event(AliasEvent):
            node = super().compose_node(parent, index)
            measured = self._size.get(id(node))
            if measured is None:
                raise ConstructorError(None, None, f"alias *{event.anchor} refers to a node that contains it "
                                                   "(recursive data)", event.start_mark)
            nodes, height = measured
            self._alias_nodes += nodes
            if self._alias_nodes > self.limits.max_alias_nodes:
                raise ConstructorError(None, None, f"aliases expand to more than {self.limits.max_alias_nodes:,} "
                                                   f"nodes (the limit; an alias bomb?)", event.start_mark)
            self._check_depth(self._depth + height, event)
            return node
        self._depth += 1
        self._nodes += 1
        if self._nodes > self.limits.max_nodes:
            raise ConstructorError(None, None, f"more than {self.limits.max_nodes:,} YAML nodes (the limit)",
                                   event.start_mark)
        self._check_depth(self._depth, event)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, SequenceNode):
            children = [self._child(c) for c in node.value]
        elif isinstance(node, MappingNode):
            children = [self._child(c) for pair in node.value for c in pair]
        else:
            children = []
        self._size[id(node)] = (1 + sum(n for n, _ in children), 1 + max((h for _, h in children), default=0))
        if getattr(event, "anchor", None):
            self._anchored.add(id(node))
        return node

    def _child(self, node: Node) -> tuple[int, int]:
        """A child's size, forgotten once read unless an alias may name it (memory: one entry a node)."""
        return self._size[id(node)] if id(node) in self._anchored else self._size.pop(id(node))

    def _check_depth(self, depth: int, event: Any) -> None:
        if depth > self.limits.max_depth:
            raise ConstructorError(None, None, f"nested deeper than {self.limits.max_depth} levels (the limit)",
                                   event.start_mark)


try:
    from yaml._yaml import CParser as _Parser  # libyaml
except ImportError:  # PyYAML built without libyaml: its pure-Python reader, scanner and parser
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _PyParser(Reader, Scanner, Parser):
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)

        def dispose(self) -> None:
            pass

    _Parser = _PyParser  # type: ignore[misc,assignment]


class _Loader(_LimitedComposer, _Parser, SafeConstructor, Resolver):  # type: ignore[misc,valid-type]
    def __init__(self, stream: str, limits: YamlLimits) -> None:
        _Parser.__init__(self, stream)
        _LimitedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.limits = limits


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


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    try:
        return SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:  # e.g. more digits than Python converts
        raise ConstructorError(None, None, f"integer of {len(str(node.value)):,} characters: too long to read",
                               node.start_mark) from None


def _construct_timestamp(loader: _Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))  # Kubernetes keeps an unquoted date a string


def _refuse(loader: _Loader, node: Node) -> None:
    raise ConstructorError(None, None, f"unsupported YAML tag {node.tag.replace('tag:yaml.org,2002:', '!!')}",
                           node.start_mark)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)
for _tag in ("binary", "omap", "pairs", "set"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)


def _yaml_error(file: str, exc: yaml.YAMLError, text: str) -> LoadError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    position = getattr(exc, "position", None)  # a ReaderError (a character YAML does not allow)
    if line is None and isinstance(position, int):
        line = text.count("\n", 0, position) + 1
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    if "exceeded maximum nesting depth" in problem:  # libyaml's own bound (1000), met before ours
        problem, context = f"nested deeper than {DEFAULT_LIMITS.max_depth} levels (the limit)", None
    context_mark = getattr(exc, "context_mark", None)
    if context and context.endswith("; first occurrence") and context_mark is not None:
        msg = f"YAML: {context.removesuffix('; first occurrence')} (first at line {context_mark.line + 1})"
    else:
        msg = f"YAML: {context} {problem}" if context and problem else f"YAML: {problem}"
    return LoadError(file, line, msg.replace("\n", " "))


def load_documents(text: str, file: str, limits: YamlLimits = DEFAULT_LIMITS) -> Iterator[tuple[int, Any]]:
    """Yield (start line, document) for every non-empty document; raise LoadError on bad YAML or
    on input beyond ``limits``."""
    try:
        loader = _Loader(text, limits)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None or _blank(node):  # '---' alone, or with only comments: skipped, as kubectl does
                    continue
                start = node.start_mark.line + 1
                yield start, loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _yaml_error(file, exc, text) from None


def _blank(node: yaml.Node) -> bool:
    """A document with nothing in it (not even an explicit ``null``)."""
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null" and node.value == ""


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

