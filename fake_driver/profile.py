"""Vendor profiles: the names behind the placeholders that cases use.

A profile is a YAML file (see ``profile.yaml`` next to this module, the profile of the bundled
fake drivers) that gives, per *role* (``gpu``, ``gpu2``, ``nic``...), the driver name, the
device classes, the published attribute and capacity names, and a few concrete values.
``load_profile`` flattens it into the placeholder map the case loader substitutes:

====================  ==========================================================
key                   value
====================  ==========================================================
``profile.name``      the profile's ``name``
``driver.<role>``     driver name, e.g. ``gpu.acme.example.com``
``class.<key>``       DeviceClass name
``attr.<role>.<k>``   fully qualified attribute or capacity name, as
                      ``matchAttribute``, ``distinctAttribute`` and
                      ``capacity.requests`` take it: ``gpu.acme.example.com/numa``
``cel.<role>.<k>``    the CEL accessor for selectors:
                      ``device.attributes['gpu.acme.example.com'].numa`` or
                      ``device.capacity['gpu.acme.example.com'].memory``
``value.<role>.<k>``  a concrete value from ``values``, as a string
====================  ==========================================================

An attribute and a capacity of one role may not share a logical key, since both land under
``attr.<role>.<key>``. Errors are ``ProfileError`` with one line: ``<file>: <field>: <problem>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

_ROLE = re.compile(r"^[a-z][A-Za-z0-9]*$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELDS = ("name", "drivers", "classes", "attributes", "capacities", "values", "shapes")


class ProfileError(ValueError):
    """A vendor profile that cannot be used; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class NameRef:
    """A logical key of a role and the fully qualified name it stands for."""

    role: str
    key: str
    qualified: str

    @property
    def domain(self) -> str:
        return self.qualified.partition("/")[0]

    @property
    def identifier(self) -> str:
        return self.qualified.partition("/")[2]


@dataclass(frozen=True, slots=True)
class VendorProfile:
    """A validated vendor profile. Mappings are kept as tuples of pairs, in file order."""

    name: str
    drivers: tuple[tuple[str, str], ...]
    classes: tuple[tuple[str, str], ...]
    attributes: tuple[NameRef, ...]
    capacities: tuple[NameRef, ...]
    values: tuple[tuple[str, str, str], ...]
    shapes: tuple[str, ...] = ()
    source: str = field(default="<profile>", compare=False)

    def driver(self, role: str) -> str:
        return dict(self.drivers)[role]

    def placeholders(self) -> dict[str, str]:
        """The flat placeholder map (keys without ``${...}``)."""
        flat = {"profile.name": self.name}
        flat.update({f"driver.{role}": driver for role, driver in self.drivers})
        flat.update({f"class.{key}": name for key, name in self.classes})
        for ref in self.attributes:
            flat[f"attr.{ref.role}.{ref.key}"] = ref.qualified
            flat[f"cel.{ref.role}.{ref.key}"] = (
                f"device.attributes['{ref.domain}'].{ref.identifier}")
        for ref in self.capacities:
            flat[f"attr.{ref.role}.{ref.key}"] = ref.qualified
            flat[f"cel.{ref.role}.{ref.key}"] = f"device.capacity['{ref.domain}'].{ref.identifier}"
        flat.update({f"value.{role}.{key}": value for role, key, value in self.values})
        return flat


def bundled_profile_path() -> Path:
    """Where the profile of the bundled fake drivers lives."""
    return Path(str(resources.files("fake_driver") / "profile.yaml"))


def load_vendor_profile(path: str | Path | None = None) -> VendorProfile:
    """Read and validate a profile file; ``None`` means the bundled one."""
    source = Path(path) if path is not None else bundled_profile_path()
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as err:
        raise ProfileError(f"{source}: cannot read profile: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ProfileError(f"{source}: {where}invalid YAML: {problem}") from None
    return parse_profile(data, str(source))


def load_profile(path: str | Path | None = None) -> dict[str, str]:
    """The flattened placeholder map of a profile file (``None``: the bundled fake drivers)."""
    return load_vendor_profile(path).placeholders()


def parse_profile(data: object, source: str = "<profile>") -> VendorProfile:
    """Validate profile data already read from YAML."""

    def fail(path: str, message: str) -> ProfileError:
        return ProfileError(f"{source}: {path}: {message}")

    if not isinstance(data, Mapping):
        raise fail("profile", "expected a mapping at the top of the file")
    for key in data:
        if key not in _FIELDS:
            raise fail(str(key), f"unknown field (allowed: {', '.join(_FIELDS)})")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise fail("name", "required, a non-empty string")

    def table(field: str, value: object) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise fail(field, "expected a mapping")
        for key in value:
            if not isinstance(key, str) or not _ROLE.match(key):
                raise fail(f"{field}.{key}", "keys must be identifiers like 'gpu' or 'gpu2'")
        return value

    drivers = table("drivers", data.get("drivers"))
    if not drivers:
        raise fail("drivers", "at least one driver role is required")
    for role, driver in drivers.items():
        if not _is_subdomain(driver, 63):
            raise fail(f"drivers.{role}", f"driver name must be a DNS subdomain of at most 63 "
                                          f"characters, got {driver!r}")
    classes = table("classes", data.get("classes"))
    for key, class_name in classes.items():
        if not _is_subdomain(class_name, 253):
            raise fail(f"classes.{key}", f"class name must be a DNS subdomain, got {class_name!r}")

    def names(field: str) -> tuple[NameRef, ...]:
        refs = []
        for role, entries in table(field, data.get(field)).items():
            if role not in drivers:
                raise fail(f"{field}.{role}", f"role {role!r} has no entry under drivers")
            for key, published in table(f"{field}.{role}", entries).items():
                qualified = _qualify(published, drivers[role])
                if qualified is None:
                    raise fail(f"{field}.{role}.{key}",
                               f"not a qualified name (C identifier of at most 32 characters, "
                               f"optionally after 'domain/'): {published!r}")
                refs.append(NameRef(role, key, qualified))
        return tuple(refs)

    attributes = names("attributes")
    capacities = names("capacities")
    seen = {(r.role, r.key) for r in attributes}
    for ref in capacities:
        if (ref.role, ref.key) in seen:
            raise fail(f"capacities.{ref.role}.{ref.key}",
                       "also defined under attributes; attr.<role>.<key> would be ambiguous")
    values = []
    for role, entries in table("values", data.get("values")).items():
        if role not in drivers:
            raise fail(f"values.{role}", f"role {role!r} has no entry under drivers")
        for key, value in table(f"values.{role}", entries).items():
            if isinstance(value, (Mapping, list)) or value is None:
                raise fail(f"values.{role}.{key}", "expected a single value")
            text = str(value).lower() if isinstance(value, bool) else str(value)
            values.append((role, key, text))
    shapes = data.get("shapes", [])
    if not isinstance(shapes, list) or not all(isinstance(s, str) for s in shapes):
        raise fail("shapes", "expected a list of shape names")
    return VendorProfile(
        name=name, drivers=tuple(drivers.items()), classes=tuple(classes.items()),
        attributes=attributes, capacities=capacities, values=tuple(values),
        shapes=tuple(shapes), source=source,
    )


def _is_subdomain(value: object, limit: int) -> bool:
    return isinstance(value, str) and len(value) <= limit and bool(_DNS_SUBDOMAIN.match(value))


def _qualify(published: object, driver: str) -> str | None:
    """``numa`` -> ``<driver>/numa``; a qualified name is checked and kept."""
    if not isinstance(published, str):
        return None
    domain, slash, identifier = published.rpartition("/")
    if not slash:
        domain = driver
    if not _is_subdomain(domain, 63) or len(identifier) > 32 \
            or not _C_IDENTIFIER.match(identifier):
        return None
    return f"{domain}/{identifier}"
