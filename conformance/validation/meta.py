"""ObjectMeta validation (apimachinery ``ValidateObjectMeta*``, core's finalizer names)."""

from __future__ import annotations

from typing import Any, Callable

from .errs import child, forbidden, index, invalid, required
from .names import is_label_value, is_qualified_name, name_is_dns_label, name_is_dns_subdomain
from .verdict import FieldErr

NameFn = Callable[[str, bool], list[str]]
TOTAL_ANNOTATION_SIZE = 256 * 1024


def validate_labels(labels: Any, path: str) -> list[FieldErr]:
    errs: list[FieldErr] = []
    for k, v in (labels or {}).items():
        errs += [invalid(path, k, m, origin="format=k8s-label-key") for m in is_qualified_name(k)]
        errs += [invalid(path, v, m, origin="format=k8s-label-value") for m in is_label_value(str(v))]
    return errs


def validate_annotations(ann: Any, path: str) -> list[FieldErr]:
    from .errs import too_long
    errs: list[FieldErr] = []
    total = 0
    for k, v in (ann or {}).items():
        errs += [invalid(path, k, m, origin="format=k8s-label-key") for m in is_qualified_name(k.lower())]
        total += len(k.encode()) + len(str(v).encode())
    if total > TOTAL_ANNOTATION_SIZE:
        errs.append(too_long(path, TOTAL_ANNOTATION_SIZE))
    return errs


def _common(meta: dict[str, Any], namespaced: bool, path: str) -> list[FieldErr]:
    errs: list[FieldErr] = []
    ns = meta.get("namespace") or ""
    if namespaced:
        if not ns:
            errs.append(required(child(path, "namespace")))
        else:
            errs += [invalid(child(path, "namespace"), ns, m) for m in name_is_dns_label(ns, False)]
    elif ns:
        errs.append(forbidden(child(path, "namespace"), "not allowed on this type"))
    gen = meta.get("generation") or 0
    if isinstance(gen, int) and gen < 0:
        errs.append(invalid(child(path, "generation"), gen, "must be greater than or equal to 0", covered=True))
    errs += validate_labels(meta.get("labels"), child(path, "labels"))
    errs += validate_annotations(meta.get("annotations"), child(path, "annotations"))
    for f in meta.get("finalizers") or []:
        errs += [invalid(child(path, "finalizers"), f, m) for m in is_qualified_name(f)]
    return errs


def validate_object_meta(meta: dict[str, Any], namespaced: bool, name_fn: NameFn = name_is_dns_subdomain,
                         path: str = "metadata") -> list[FieldErr]:
    """ValidateObjectMeta: generateName, name, then the common checks."""
    errs: list[FieldErr] = []
    gen = meta.get("generateName") or ""
    if gen:
        errs += [invalid(child(path, "generateName"), gen, m) for m in name_fn(gen, True)]
    name = meta.get("name") or ""
    if not name:
        errs.append(required(child(path, "name"), "name or generateName is required"))
    else:
        errs += [invalid(child(path, "name"), name, m) for m in name_fn(name, False)]
    return errs + _common(meta, namespaced, path)


def validate_object_meta_with_errors(meta: dict[str, Any], namespaced: bool,
                                     name_errs: Callable[[str, str], list[FieldErr]], path: str = "metadata") -> list[FieldErr]:
    """ValidateObjectMetaWithOpts: the name function returns field errors itself."""
    errs: list[FieldErr] = []
    name = meta.get("name") or ""
    if not name:
        errs.append(required(child(path, "name"), "name or generateName is required"))
    else:
        errs += name_errs(child(path, "name"), name)
    return errs + _common(meta, namespaced, path)


def validate_object_meta_update(new: dict[str, Any], old: dict[str, Any], path: str = "metadata") -> list[FieldErr]:
    from .errs import child as c
    errs: list[FieldErr] = []
    if not new.get("resourceVersion"):
        errs.append(invalid(c(path, "resourceVersion"), "", "must be specified for an update"))
    gen, old_gen = new.get("generation") or 0, old.get("generation") or 0
    if gen < 0:
        errs.append(invalid(c(path, "generation"), gen, "must be greater than or equal to 0", covered=True))
    if gen < old_gen:
        errs.append(invalid(c(path, "generation"), gen, "must not be decremented"))
    for f in ("name", "namespace"):
        if (new.get(f) or "") != (old.get(f) or ""):
            errs.append(invalid(c(path, f), new.get(f) or "", "field is immutable"))
    return errs


TEMPLATE_META_FIELDS = {"labels", "annotations"}


def validate_template_meta(meta: dict[str, Any] | None, path: str) -> list[FieldErr]:
    """ValidateTemplateObjectMeta: annotations, labels; every other field "cannot be set"."""
    meta = meta or {}
    errs = validate_annotations(meta.get("annotations"), child(path, "annotations"))
    errs += validate_labels(meta.get("labels"), child(path, "labels"))
    for k in meta:
        if k not in TEMPLATE_META_FIELDS and meta[k] not in (None, "", {}, [], 0):
            errs.append(forbidden(child(path, k), "cannot be set"))
    return errs


__all__ = ["validate_object_meta", "validate_object_meta_update", "validate_object_meta_with_errors",
           "validate_template_meta", "validate_labels", "validate_annotations", "index"]


def path_segment_name(name: str, prefix: bool) -> list[str]:
    """content.IsPathSegmentName / IsPathSegmentPrefix."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def validate_common_update(new: dict[str, Any], old: dict[str, Any], namespaced: bool) -> list[FieldErr]:
    """rest.validateCommonFields: the object's metadata with path-segment names, then the update."""
    return validate_object_meta(new, namespaced, path_segment_name) + validate_object_meta_update(new, old)
