"""A small typed reader over wire-form dicts that tracks the field path and rejects unknown keys.

Every model parser uses it, so every validation failure carries the path a user needs
(``spec.devices.requests[0].name``) and the YAML loader can add the line.
"""

from __future__ import annotations

import builtins

import re
from typing import Any, Callable, Iterator, TypeVar

from ..errors import FieldError

T = TypeVar("T")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_QUALIFIED_KEY_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")


class Reader:
    """Read one JSON object at ``path``; call :meth:`done` to refuse fields nobody read."""

    def __init__(self, data: Any, path: tuple[object, ...] = ()) -> None:
        if not isinstance(data, dict):
            raise FieldError(path, f"must be an object, got {type_name(data)}")
        self.data = data
        self.path = path
        self._seen: set[str] = set()

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def raw(self, key: str) -> Any:
        self._seen.add(key)
        return self.data.get(key)

    def at(self, key: str | int) -> tuple[object, ...]:
        return self.path + (key,)

    def str(self, key: builtins.str, *, required: builtins.bool = False, default: builtins.str | None = None) -> builtins.str | None:
        v = self.raw(key)
        if v is None or v == "":
            if required:
                raise FieldError(self.at(key), "required value")
            return default
        if not isinstance(v, str):
            raise FieldError(self.at(key), f"must be a string, got {type_name(v)}")
        return v

    def int(self, key: builtins.str, *, required: builtins.bool = False, default: builtins.int | None = None) -> builtins.int | None:
        v = self.raw(key)
        if v is None:
            if required:
                raise FieldError(self.at(key), "required value")
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            raise FieldError(self.at(key), f"must be an integer, got {type_name(v)}")
        return v

    def bool(self, key: builtins.str, *, default: builtins.bool | None = None) -> builtins.bool | None:
        v = self.raw(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise FieldError(self.at(key), f"must be a boolean, got {type_name(v)}")
        return v

    def obj(self, key: builtins.str, *, required: builtins.bool = False) -> "Reader | None":
        v = self.raw(key)
        if v is None:
            if required:
                raise FieldError(self.at(key), "required value")
            return None
        return Reader(v, self.at(key))

    def items(self, key: builtins.str, *, max_items: builtins.int | None = None, required: builtins.bool = False) -> Iterator[tuple[Any, tuple[object, ...]]]:
        v = self.raw(key)
        if v is None:
            if required:
                raise FieldError(self.at(key), "required value")
            return iter(())
        if not isinstance(v, list):
            raise FieldError(self.at(key), f"must be a list, got {type_name(v)}")
        if max_items is not None and len(v) > max_items:
            raise FieldError(self.at(key), f"must have at most {max_items} items, got {len(v)}")
        return ((item, self.at(key) + (i,)) for i, item in enumerate(v))

    def objs(self, key: builtins.str, parse: Callable[["Reader"], T], *, max_items: builtins.int | None = None,
             required: builtins.bool = False) -> tuple[T, ...]:
        return tuple(parse(Reader(item, path)) for item, path in self.items(key, max_items=max_items, required=required))

    def strs(self, key: builtins.str, *, max_items: builtins.int | None = None, unique: builtins.bool = False) -> tuple[builtins.str, ...]:
        out: list[builtins.str] = []
        for item, path in self.items(key, max_items=max_items):
            if not isinstance(item, str):
                raise FieldError(path, f"must be a string, got {type_name(item)}")
            if unique and item in out:
                raise FieldError(path, f"duplicate value {item!r}")
            out.append(item)
        return tuple(out)

    def str_map(self, key: builtins.str) -> dict[builtins.str, builtins.str]:
        v = self.raw(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise FieldError(self.at(key), f"must be an object, got {type_name(v)}")
        out: dict[builtins.str, builtins.str] = {}
        for k, val in v.items():
            if not isinstance(val, str):
                raise FieldError(self.at(key) + (k,), f"must be a string, got {type_name(val)}")
            out[str(k)] = val
        return out

    def ignore(self, *keys: builtins.str) -> None:
        self._seen.update(keys)

    def done(self) -> None:
        for key in self.data:
            if key not in self._seen:
                raise FieldError(self.at(key), "unknown field")


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(v), "list" if isinstance(v, list) else "object" if isinstance(v, dict) else type(v).__name__)


def check_dns_label(path: tuple[object, ...], value: str, what: str = "must be a DNS label") -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise FieldError(path, f"{what} (lower-case alphanumerics and '-', at most 63 characters): {value!r}")
    return value


def check_dns_subdomain(path: tuple[object, ...], value: str, max_len: int = 253) -> str:
    if len(value) > max_len or not _DNS_SUBDOMAIN.match(value):
        raise FieldError(path, f"must be a DNS subdomain of at most {max_len} characters: {value!r}")
    return value


def check_qualified_name(path: tuple[object, ...], value: str) -> str:
    """A device attribute/capacity name: a C identifier of at most 32 characters, optionally
    prefixed by ``<DNS subdomain of at most 63>/``."""
    dom, sep, ident = value.rpartition("/")
    if sep:
        if not dom or len(dom) > 63 or not _DNS_SUBDOMAIN.match(dom):
            raise FieldError(path, f"domain of {value!r} must be a DNS subdomain of at most 63 characters")
    if len(ident) > 32 or not _C_IDENTIFIER.match(ident):
        raise FieldError(path, f"name {ident!r} must be a C identifier of at most 32 characters")
    return value


def check_fully_qualified_name(path: tuple[object, ...], value: str) -> str:
    """Constraint attribute names must carry a domain."""
    if "/" not in value:
        raise FieldError(path, f"must be a fully qualified name (domain/name): {value!r}")
    return check_qualified_name(path, value)


def check_label_key(path: tuple[object, ...], key: str) -> str:
    prefix, sep, name = key.rpartition("/")
    if sep and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise FieldError(path, f"label key prefix must be a DNS subdomain: {key!r}")
    if not name or len(name) > 63 or not _QUALIFIED_KEY_NAME.match(name):
        raise FieldError(path, f"label key name must be at most 63 alphanumerics, '-', '_' or '.': {key!r}")
    return key


def check_label_value(path: tuple[object, ...], value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise FieldError(path, f"invalid label value {value!r}")
    return value
