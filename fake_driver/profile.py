"""Vendor profiles: the names behind the placeholders that cases use.

A profile is a YAML file (see ``profile.yaml`` next to this module, the profile of the bundled
fake drivers, and ``examples/vendor-example.yaml``) that gives, per *role* (``gpu``, ``gpu2``,
``nic``...), the driver name, the device classes, the published attribute and capacity names,
and a few concrete values. Its shape is the JSON Schema ``profile.schema.json``; the checks a
schema cannot express (a role used under ``attributes`` must have a driver, an attribute and a
capacity of one role may not share a key, a domain is at most 63 characters) follow it.
``load_profile`` flattens a profile into the placeholder map the case loader substitutes:

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
``dut.driver``        the driver under test (``driverUnderTest.role``, default:
                      the first role)
``dut.class``         the DeviceClass that selects its devices
``dut.role``          its role
====================  ==========================================================

``driverUnderTest`` (:class:`DriverUnderTest`) is what the driver suite holds that driver to
(pool layout, attribute types, numaNode, optional behaviours, the env its CDI edits give a
container) and how drakit's local cluster starts its kubelet plugin (:class:`PluginSpec`).

A profile whose drivers are all drakit's fake drivers describes the fake driver
(:attr:`VendorProfile.fake`); any other profile describes a vendor's own driver, which runs in
the cluster under test and publishes its own ResourceSlices. Errors are ``ProfileError`` with
one line: ``<file>:<line>: <field>: <problem>`` (no line when the data did not come from a file).
"""

from __future__ import annotations

import functools
import json
import re
import string
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import jsonschema

from drakit.conformance.errors import LoadError, format_path
from drakit.conformance.yamlmarks import line_of, load_documents
from drakit.fake_driver.envtemplate import EnvPattern, check

SCHEMA_PATH = Path(__file__).with_name("profile.schema.json")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# the placeholders of driverUnderTest.plugin's command and folders (clusters.local.vendorplugin)
PLUGIN_PLACEHOLDERS = ("node", "kubeconfig", "registryDir", "pluginsDir", "cdiDir", "drakitBin", "metricsPort",
                       "binary", "profileDir", "nodeDir", "kubeletDir")
# those of driverUnderTest.controller's command (a process for the cluster, on no node)
CONTROLLER_PLACEHOLDERS = ("kubeconfig", "drakitBin", "metricsPort", "binary", "profileDir", "nodeDir")
# what driverUnderTest.plugin.needs may name: what a node of the fake runtime lacks
NODE_NEEDS = {"nri": "NRI (the container runtime's socket /var/run/nri/nri.sock)",
              "stockPaths": "the stock paths /var/lib/kubelet and /var/run/cdi as the node's own"}


class ProfileError(ValueError):
    """A vendor profile that cannot be used; the message names the file, line and field."""


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


def fake_driver_names() -> frozenset[str]:
    """The driver names of drakit's bundled fake drivers."""
    from drakit.fake_hw.vendors import VENDORS
    return frozenset(v.driver for v in VENDORS)


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """A local checkout of the driver's Go module and the package drakit builds from it."""

    dir: str  # as written: relative to the profile's folder, ~ and $VAR expanded when resolved
    package: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """How drakit's local cluster starts the driver's kubelet plugin (clusters.local.vendorplugin),
    or, as ``driverUnderTest.controller``, its cluster-wide process."""

    command: tuple[str, ...]
    folders: tuple[str, ...] = ()
    device_classes: tuple[tuple[str, str], ...] = ()  # (name, CEL selector)
    metrics_path: str | None = None  # its Prometheus metrics on 127.0.0.1:{metricsPort}
    binary: str | None = None  # v2: a name on PATH or a path relative to the profile
    go_install: str | None = None  # v2: <module>/cmd/<x>@<version>, built into drakit's driver cache
    source: SourceSpec | None = None  # v2: a local checkout built into drakit's driver cache
    env: tuple[tuple[str, str], ...] = ()  # v2: the process's environment (same placeholders)
    profile_dir: str = ""  # the profile's folder: where relative paths start
    needs: tuple[str, ...] = ()  # v2: nri, stockPaths (NODE_NEEDS): only containerd nodes have them
    setup: tuple[str, ...] = ()  # v2: a per-node command run before each start of the plugin
    build_hint: str | None = None  # v2 ``build``: one line saying what to build (programs drakit does not build)

    @property
    def builds(self) -> bool:
        return self.go_install is not None or self.source is not None


@dataclass(frozen=True, slots=True)
class Configuration:
    """A named variant of the driver's configuration (profile v2): extra plugin arguments and
    environment, and the optional behaviours that variant has."""

    name: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    optional: tuple[str, ...] | None = None  # None: driverUnderTest.optional
    description: str = ""
    capacities: tuple[str, ...] | None = None  # the role's capacity keys it publishes; None: all


@dataclass(frozen=True, slots=True)
class DriverUnderTest:
    """The driver the driver suite checks, and what it is held to."""

    role: str
    driver: str
    class_name: str | None
    pools: str = "per-node"
    numa_node: bool = False
    attribute_types: tuple[tuple[str, str, str], ...] = ()  # (key, qualified name, type)
    optional: tuple[str, ...] = ()
    container_env: tuple[tuple[str, Any], ...] = ()  # (key template, value template or EnvPattern)
    plugin: PluginSpec | None = None
    node_shapes: tuple[str, ...] = ()  # drakit's fake driver: the shape of each driver node
    controller: PluginSpec | None = None  # v2: started once per cluster
    configurations: tuple[Configuration, ...] = ()  # v2: named variants, each a run of the suite
    cpuset_env: str | None = None  # v2: a containerEnv key whose value the container's CPUs must be
    container_devices: tuple[str, ...] = ()  # v2: device node path templates a claim's container gets


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
    description: str = ""
    source: str = field(default="<profile>", compare=False)
    under_test: DriverUnderTest | None = None
    version: int = 1

    def driver(self, role: str) -> str:
        return dict(self.drivers)[role]

    @property
    def driver_names(self) -> tuple[str, ...]:
        """The distinct driver names, in file order."""
        return tuple(dict.fromkeys(d for _, d in self.drivers))

    @property
    def fake(self) -> bool:
        """True when every driver is one of drakit's fake drivers: drakit may then publish fake
        hardware for them. Otherwise the profile describes a vendor's own driver."""
        return set(self.driver_names) <= fake_driver_names()

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
        if self.under_test is not None:
            flat["dut.role"] = self.under_test.role
            flat["dut.driver"] = self.under_test.driver
            if self.under_test.class_name:
                flat["dut.class"] = self.under_test.class_name
        return flat

    def describe(self) -> dict[str, Any]:
        """What results.json records about the profile (file name only, never its folder)."""
        return {"name": self.name, "file": Path(self.source).name, "drivers": list(self.driver_names),
                "fakeDriver": self.fake}

    def configured(self, name: str) -> "VendorProfile":
        """The profile as one of its configurations runs it: the plugin's command with the
        configuration's arguments appended and its environment added, its optional behaviours."""
        dut = self.under_test
        if dut is None:
            return self
        conf = next((c for c in dut.configurations if c.name == name), None)
        if conf is None:
            raise ProfileError(f"{self.source}: driverUnderTest.configurations: no configuration {name!r} "
                               f"(known: {', '.join(c.name for c in dut.configurations) or 'none'})")
        plugin = dut.plugin
        if plugin is not None:
            plugin = replace(plugin, command=plugin.command + conf.args, env=plugin.env + conf.env)
        optional = dut.optional if conf.optional is None else conf.optional
        capacities = self.capacities if conf.capacities is None else tuple(
            r for r in self.capacities if r.role != dut.role or r.key in conf.capacities)
        return replace(self, capacities=capacities,
                       under_test=replace(dut, plugin=plugin, optional=optional, configurations=(conf,)))


def bundled_profile_path() -> Path:
    """Where the profile of the bundled fake drivers lives."""
    return Path(str(resources.files("drakit.fake_driver") / "profile.yaml"))


def load_vendor_profile(path: str | Path | None = None) -> VendorProfile:
    """Read and validate a profile file; ``None`` means the bundled one."""
    from drakit.conformance.inputs import PROFILE, InputError, read_text
    source = Path(path) if path is not None else bundled_profile_path()
    try:  # drakit's one reader: a regular file, its size bounded, strict UTF-8
        text = read_text(source, PROFILE)
    except InputError as err:
        raise ProfileError(f"{source}: cannot read profile: {err.reason}") from None
    return parse_profile_text(text, source)


def parse_profile_text(text: str, source: str | Path) -> VendorProfile:
    """Parse and validate the text of a profile file (bounded YAML, one document)."""
    try:
        docs = list(load_documents(text, str(source)))
    except LoadError as err:
        where = f"{source}:{err.line}" if err.line else str(source)
        raise ProfileError(f"{where}: invalid YAML: {err.message.removeprefix('YAML: ')}") from None
    if len(docs) != 1:
        line = docs[1][0] if docs else None
        where = f"{source}:{line}" if line else str(source)
        raise ProfileError(f"{where}: profile: expected exactly one YAML document, found {len(docs)}")
    return parse_profile(docs[0][1], str(source))


def load_profile(path: str | Path | None = None) -> dict[str, str]:
    """The flattened placeholder map of a profile file (``None``: the bundled fake drivers)."""
    return load_vendor_profile(path).placeholders()


def parse_profile(data: object, source: str = "<profile>") -> VendorProfile:
    """Validate profile data read from YAML (line marks, when present, go into the errors)."""

    def fail(path: tuple[object, ...], message: str) -> ProfileError:
        line = line_of(data, path) if path else getattr(data, "line", None)
        where = f"{source}:{line}" if line else source
        return ProfileError(f"{where}: {format_path(path) if path else 'profile'}: {message}")

    if not isinstance(data, Mapping):
        raise fail((), "expected a mapping at the top of the file")
    problem = _schema_problem(data)
    if problem is not None:
        raise fail(*problem)
    drivers: Mapping[str, str] = data["drivers"]
    classes: Mapping[str, str] = data.get("classes") or {}

    def names(field_: str) -> tuple[NameRef, ...]:
        refs = []
        for role, entries in (data.get(field_) or {}).items():
            if role not in drivers:
                raise fail((field_, role), f"role {role!r} has no entry under drivers")
            for key, published in entries.items():
                qualified = _qualify(published, drivers[role])
                if qualified is None:
                    raise fail((field_, role, key),
                               f"not a qualified name (domain of at most 63 characters): {published!r}")
                refs.append(NameRef(role, key, qualified))
        return tuple(refs)

    attributes = names("attributes")
    capacities = names("capacities")
    seen = {(r.role, r.key) for r in attributes}
    for ref in capacities:
        if (ref.role, ref.key) in seen:
            raise fail(("capacities", ref.role, ref.key),
                       "also defined under attributes; attr.<role>.<key> would be ambiguous")
    values = []
    for role, entries in (data.get("values") or {}).items():
        if role not in drivers:
            raise fail(("values", role), f"role {role!r} has no entry under drivers")
        for key, value in entries.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            values.append((role, key, text))
    known = {r.key for r in capacities if r.role == str((data.get("driverUnderTest") or {}).get("role") or next(iter(drivers)))}
    for i, c in enumerate((data.get("driverUnderTest") or {}).get("configurations") or ()):
        for j, key in enumerate(c.get("capacities") or ()):
            if key not in known:
                raise fail(("driverUnderTest", "configurations", i, "capacities", j),
                           f"{key!r} is not a key of capacities of the role under test (known: {', '.join(sorted(known)) or 'none'})")
    version = int(data.get("version") or 1)
    if version < 2:
        for path in _v2_fields(data):
            raise fail(path, "needs version: 2 at the top of the profile (a profile v2 field)")
    return VendorProfile(
        version=version,
        name=data["name"], drivers=tuple((str(r), str(d)) for r, d in drivers.items()),
        classes=tuple((str(k), str(c)) for k, c in classes.items()),
        attributes=attributes, capacities=capacities, values=tuple(values),
        shapes=tuple(data.get("shapes") or ()), description=str(data.get("description") or ""), source=source,
        under_test=_under_test(data, drivers, classes, attributes, fail, source),
    )


def _under_test(data: Mapping[str, Any], drivers: Mapping[str, str], classes: Mapping[str, str],
                attributes: tuple[NameRef, ...], fail: Any, source: str) -> DriverUnderTest:
    dut: Mapping[str, Any] = data.get("driverUnderTest") or {}
    role = str(dut.get("role") or next(iter(drivers)))
    if role not in drivers:
        raise fail(("driverUnderTest", "role"), f"role {role!r} has no entry under drivers")
    class_key = str(dut.get("class") or role)
    if "class" in dut and class_key not in classes:
        raise fail(("driverUnderTest", "class"), f"class key {class_key!r} has no entry under classes")
    names = {r.key: r.qualified for r in attributes if r.role == role}
    types = []
    for key, kind in (dut.get("attributeTypes") or {}).items():
        if key not in names:
            raise fail(("driverUnderTest", "attributeTypes", key),
                       f"attribute {key!r} of role {role!r} has no entry under attributes.{role}")
        types.append((str(key), names[key], str(kind)))
    profile_dir = str(Path(source).resolve().parent) if source != "<profile>" else ""
    plugin = _program(dut.get("plugin"), profile_dir, ("driverUnderTest", "plugin"), fail)
    controller = _program(dut.get("controller"), profile_dir, ("driverUnderTest", "controller"), fail)
    env = []
    for key, value in (dut.get("containerEnv") or {}).items():
        template: Any = EnvPattern(value["pattern"]) if isinstance(value, Mapping) else str(value)
        for part in (str(key), template):
            problem = check(part)
            if problem:
                raise fail(("driverUnderTest", "containerEnv", key), problem)
        env.append((str(key), template))
    devices = tuple(str(d) for d in dut.get("containerDevices") or ())
    for i, problem in ((i, check(d)) for i, d in enumerate(devices)):
        if problem:
            raise fail(("driverUnderTest", "containerDevices", i), problem)
    configurations = []
    for i, c in enumerate(dut.get("configurations") or ()):
        if c["name"] in {x.name for x in configurations}:
            raise fail(("driverUnderTest", "configurations", i, "name"), f"configuration {c['name']!r} is named twice")
        configurations.append(Configuration(c["name"], tuple(c.get("args") or ()), tuple((c.get("env") or {}).items()),
                                            tuple(c["optional"]) if "optional" in c else None, str(c.get("description") or ""),
                                            tuple(c["capacities"]) if "capacities" in c else None))
    if configurations and plugin is None:
        raise fail(("driverUnderTest", "configurations"), "configurations change how the plugin starts: "
                                                          "driverUnderTest.plugin is needed")
    return DriverUnderTest(role=role, driver=drivers[role], class_name=classes.get(class_key),
                           pools=str(dut.get("pools") or "per-node"), numa_node=bool(dut.get("numaNode")),
                           attribute_types=tuple(types), optional=tuple(dut.get("optional") or ()),
                           container_env=tuple(env), plugin=plugin, controller=controller,
                           configurations=tuple(configurations), cpuset_env=_cpuset_env(dut, fail), container_devices=devices,
                           node_shapes=tuple(str(x) for x in dut.get("nodeShapes") or ()))


def _cpuset_env(dut: Mapping[str, Any], fail: Any) -> str | None:
    key = dut.get("cpusetEnv")
    if key is not None and key not in (dut.get("containerEnv") or {}):
        raise fail(("driverUnderTest", "cpusetEnv"), f"{key!r} is not a key of driverUnderTest.containerEnv")
    return None if key is None else str(key)


def _program(raw: Any, profile_dir: str, path: tuple[str, ...], fail: Any) -> PluginSpec | None:
    if not raw:
        return None
    known = CONTROLLER_PLACEHOLDERS if path[-1] == "controller" else PLUGIN_PLACEHOLDERS
    for field_ in ("command", "folders", "setup"):
        for i, arg in enumerate(raw.get(field_) or ()):
            problem = template_problem(arg, known)
            if problem:
                raise fail(path + (field_, i), problem)
    for key, value in (raw.get("env") or {}).items():
        problem = template_problem(str(value), known)
        if problem:
            raise fail(path + ("env", key), problem)
    ways = [k for k in ("binary", "goInstall", "source") if k in raw]
    if len(ways) > 1:
        raise fail(path + (ways[1],), f"give one of binary, goInstall and source, not {' and '.join(ways)}")
    src = raw.get("source")
    return PluginSpec(tuple(raw["command"]), tuple(raw.get("folders") or ()),
                      tuple((c["name"], c["selector"]) for c in raw.get("deviceClasses") or ()),
                      raw.get("metricsPath"), raw.get("binary"), raw.get("goInstall"),
                      SourceSpec(str(src["dir"]), str(src["package"]), tuple(src.get("tags") or ())) if src else None,
                      tuple((str(k), str(v)) for k, v in (raw.get("env") or {}).items()), profile_dir,
                      tuple(str(n) for n in raw.get("needs") or ()), tuple(raw.get("setup") or ()), raw.get("build"))


def _v2_fields(data: Mapping[str, Any]) -> list[tuple[object, ...]]:
    """Where a version-1 profile uses a field of version 2."""
    dut = data.get("driverUnderTest") or {}
    found: list[tuple[object, ...]] = [("driverUnderTest", k) for k in ("controller", "configurations", "cpusetEnv", "containerDevices")
                                       if k in dut]
    for key in ("binary", "goInstall", "source", "env", "needs", "setup", "build"):
        if key in (dut.get("plugin") or {}):
            found.append(("driverUnderTest", "plugin", key))
    found += [("driverUnderTest", "containerEnv", k) for k, v in (dut.get("containerEnv") or {}).items()
              if isinstance(v, Mapping)]
    return found


def template_problem(arg: str, known: tuple[str, ...] = PLUGIN_PLACEHOLDERS) -> str | None:
    """What is wrong with the ``{placeholders}`` of one plugin command argument (None: nothing)."""
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
    except ValueError as exc:  # a lone brace
        return f"{exc} in {arg[:200]!r} (write {{{{ and }}}} for literal braces)"
    for name in names:
        if name not in known:
            return (f"unknown placeholder {{{name[:100]}}} in {arg[:200]!r} "
                    f"(known: {', '.join('{' + p + '}' for p in known)})")
    return None


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    from drakit.conformance.schemas import validator
    return validator(schema)  # type: ignore[no-any-return]


def _schema_problem(data: Any) -> tuple[tuple[object, ...], str] | None:
    """The first schema violation (in file order) as (field path, message), or None."""
    found = []
    for err in _validator().iter_errors(data):
        path = tuple(err.absolute_path)
        schema = err.schema if isinstance(err.schema, Mapping) else {}
        if err.validator == "required":
            missing = next((p for p in err.validator_value if p not in (err.instance or {})), "?")
            path += (missing,)
            message = (schema.get("properties", {}).get(missing, {}).get("errorMessage")
                       or "required")
        elif err.validator == "additionalProperties" and err.validator_value is False:
            allowed = schema.get("properties") or {}
            path += (next((k for k in err.instance if k not in allowed), "?"),)
            message = f"unknown field (allowed: {', '.join(allowed)})"
        elif "propertyNames" in err.relative_schema_path:
            path += (err.instance,)
            message = schema.get("errorMessage") or err.message
        else:
            message = schema.get("errorMessage") or err.message
            if isinstance(err.instance, str) and err.validator in ("pattern", "maxLength", "minLength"):
                message += f", got {err.instance!r}"
        found.append((line_of(data, path) or 0, -len(path), path, message))
    if not found:
        return None
    _, _, path, message = min(found, key=lambda f: (f[0], f[1]))
    return path, message


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
