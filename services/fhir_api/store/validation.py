"""Validate resources on write with fhir.resources R4B (differs from R4 only in types we do not serve).

FHIR JSON lets every primitive carry an id and extensions in a sibling `_name` property (FHIR JSON,
"Representing primitive elements"). fhir.resources models that as a `name__ext` field beside nearly every
primitive, but not beside Extension's own primitive `value[x]` (nor StructureMap.import): 47 of the official
R4 examples (CodeSystems of the v2 tables, `"_valueString": {"extension": [...]}`) were refused for it. So a
refusal of an unknown `_name` property is re-examined: where `name` is a primitive of the model at that
place that has no `name__ext`, the `_name` value is validated as the primitive extension it is (an Element:
id and extensions), taken out of a copy, and the rest validated again. Whether the `_name` arrays pair with
their primitives index by index is the HTTP layer's check (services/fhir_api/http/hostile.py).
"""

from __future__ import annotations

import copy
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError

from services.fhir_api.store.interface import InvalidResource

Loc = tuple[str | int, ...]
# Primitives of FHIRPath System types, which carry no extensions: Extension.url (and every id, of an element
# or of a resource).
_XML_ATTRIBUTES = frozenset({("url", "Extension")})


@cache
def _model(resource_type: str):
    from fhir.resources.R4B import get_fhir_model_class

    try:
        return get_fhir_model_class(resource_type)
    except (KeyError, ValueError):
        return None


def validate_resource(resource: dict) -> None:
    """Raise InvalidResource with one message per problem (the stored JSON is never re-serialised)."""
    model = _model(resource["resourceType"])
    if model is None:
        raise InvalidResource(f"unknown resourceType '{resource['resourceType']}'")
    if resource["resourceType"] == "Bundle" and (twice := repeated_full_url(resource)) is not None:
        raise InvalidResource(f"invalid Bundle: fullUrl {twice[:120]!r} appears more than once (bdl-7)")
    try:
        model.model_validate(resource)
    except ValidationError as exc:
        errors = exc.errors()
        unmodelled = [err["loc"] for err in errors if err["type"] == "extra_forbidden"
                      and _unmodelled_extension(model, resource, err["loc"])]
        issues = _revalidate(model, resource, unmodelled) if unmodelled else _messages(errors)
        if issues:
            raise InvalidResource(f"invalid {resource['resourceType']}", issues) from exc


def repeated_full_url(bundle: dict, *, versions_differ_ok: bool = True) -> str | None:
    """The first fullUrl two entries share, or None (bdl-7: fullUrl is unique within a Bundle, or else its
    entries differ in meta.versionId; a history Bundle may repeat it). fhir.resources checks no invariant.
    `versions_differ_ok=False`: unique outright (a transaction resolves references by fullUrl)."""
    if bundle.get("type") == "history" or not isinstance(bundle.get("entry"), list):
        return None
    seen: set[tuple[str, object]] = set()
    for entry in bundle["entry"]:
        url = entry.get("fullUrl") if isinstance(entry, dict) else None
        if not isinstance(url, str):
            continue
        resource = entry.get("resource")
        meta = resource.get("meta") if isinstance(resource, dict) else None
        version = meta.get("versionId") if isinstance(meta, dict) and versions_differ_ok else None
        key = (url, version)
        if key in seen:
            return url
        seen.add(key)
    return None


def _messages(errors: list, prefix: str = "") -> list[str]:
    return [f"{'.'.join(str(p) for p in ((prefix,) if prefix else ()) + tuple(err['loc']))}: {err['msg']}"
            for err in errors]


def _revalidate(model: type[BaseModel], resource: dict, locs: list[Loc]) -> list[str]:
    """The problems of `resource` once the primitive extensions at `locs` are checked and taken out."""
    from fhir.resources.R4B.fhirprimitiveextension import FHIRPrimitiveExtension

    trimmed = copy.deepcopy(resource)
    issues: list[str] = []
    for loc in locs:
        parent_model, parent = _resolve(model, trimmed, loc[:-1])
        key = str(loc[-1])
        where = ".".join(str(p) for p in loc)
        issues += _choice_conflict(parent_model, parent, key[1:], where)
        value = parent.pop(key)
        repeats = _is_list(parent_model.model_fields[_field_name(parent_model, key[1:])].annotation)
        if isinstance(value, list) != repeats:
            shape = "an array (the primitive repeats)" if repeats else "an object (the primitive is single)"
            issues.append(f"{where}: must be {shape}")
            continue
        for index, element in enumerate(value if isinstance(value, list) else [value]):
            if element is None and isinstance(value, list):
                continue  # a placeholder: its pairing with the primitive array is hostile.py's check
            at = f"{where}.{index}" if isinstance(value, list) else where
            if not isinstance(element, dict):
                issues.append(f"{at}: a primitive's extensions are an object (id, extension)")
                continue
            try:
                FHIRPrimitiveExtension.model_validate(element)
            except ValidationError as exc:
                issues += _messages(exc.errors(), at)
    try:
        model.model_validate(trimmed)
    except ValidationError as exc:
        issues += _messages(exc.errors())
    return issues


def _unmodelled_extension(model: type[BaseModel], resource: dict, loc: Loc) -> bool:
    """Whether `loc` names `_name` beside a primitive `name` that the model there has no `__ext` field for."""
    key = loc[-1] if loc else None
    if not isinstance(key, str) or not key.startswith("_"):
        return False
    try:
        parent_model, _parent = _resolve(model, resource, loc[:-1])
    except (KeyError, IndexError, TypeError):
        return False
    name = _field_name(parent_model, key[1:])
    if name is None or _klass(parent_model.model_fields[name].annotation) is not None:
        return False
    if name == "id" or (name, parent_model.__name__) in _XML_ATTRIBUTES:
        return False
    return f"{name}__ext" not in parent_model.model_fields


def _choice_conflict(model: type[BaseModel], node: dict, alias: str, where: str) -> list[str]:
    """value[x] holds one type: `_valueString` beside `valueInteger` (or `_valueInteger`) is two values."""
    name = _field_name(model, alias)
    extra = model.model_fields[name].json_schema_extra if name else None
    group = extra.get("one_of_many") if isinstance(extra, dict) else None
    if group is None:
        return []
    others = {_field_name(model, key.lstrip("_")) for key in node} - {name, None}
    if any((model.model_fields[o].json_schema_extra or {}).get("one_of_many") == group for o in others):
        return [f"{where}: {group}[x] already has a value of another type (a choice holds one)"]
    return []


def _resolve(model: type[BaseModel], node: Any, loc: Loc) -> tuple[type[BaseModel], Any]:
    """The model class and the JSON node at `loc` (aliases and list indexes, as pydantic reports them)."""
    for step in loc:
        if isinstance(step, int):
            node = node[step]
        else:
            name = _field_name(model, step)
            node = node[step]
            klass = _klass(model.model_fields[name].annotation) if name else None
            if klass is None:
                raise KeyError(step)
            model = klass
        if isinstance(node, dict) and isinstance(node.get("resourceType"), str):  # contained, entry.resource
            model = _model(node["resourceType"]) or model
    return model, node


@cache
def _aliases(model: type[BaseModel]) -> dict[str, str]:
    return {(field.alias or name): name for name, field in model.model_fields.items()}


def _field_name(model: type[BaseModel], alias: str) -> str | None:
    return _aliases(model).get(alias)


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list or any(_is_list(arg) for arg in typing.get_args(annotation))


def _klass(annotation: Any) -> type[BaseModel] | None:
    """The model class of a complex field's annotation (Optional/List of a fhirtypes type); None for a
    primitive."""
    getter = getattr(annotation, "get_model_klass", None)
    if getter is not None:
        return getter()
    for arg in typing.get_args(annotation):
        found = _klass(arg)
        if found is not None:
            return found
    return None
