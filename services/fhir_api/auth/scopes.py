"""SMART on FHIR scopes (v2 `<context>/<type>.<cruds>`; v1 `.read` / `.write` / `.*` too) and what they grant.

A scope names a context (`patient`, `user`, `system`), a resource type or `*`, and the interactions it allows:
c create, r read (by id, vread, instance history), u update and patch, d delete, s search (type and system
search, history). `patient/` scopes are confined to the token's patient compartment; `user/` and `system/`
scopes are not (services/fhir_api/auth/compartment.py applies the confinement).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Context = Literal["patient", "user", "system"]
VERBS = "cruds"
_V1 = {"read": "rs", "write": "cud", "*": "cruds"}
_SCOPE = re.compile(r"^(patient|user|system)/(\*|[A-Z][A-Za-z]{1,63})\.(\*|read|write|c?r?u?d?s?)$")
# Scopes a token may carry beside resource scopes (SMART launch / identity); they grant nothing here.
_OTHER = re.compile(r"^(launch(/[a-z]+)?|openid|fhirUser|profile|offline_access|online_access)$")


class ScopeError(ValueError):
    """A scope string that is not a SMART resource scope (and not a known non-resource scope)."""


@dataclass(frozen=True)
class Scope:
    context: Context
    resource_type: str  # "*" = every type
    verbs: str  # a subset of "cruds", in that order

    def __str__(self) -> str:
        return f"{self.context}/{self.resource_type}.{self.verbs}"

    def grants(self, resource_type: str, verb: str) -> bool:
        return verb in self.verbs and self.resource_type in ("*", resource_type)

    def covers(self, other: Scope) -> bool:
        """Everything `other` allows, this allows too (a patient/ scope never covers user/ or system/)."""
        same_context = self.context == other.context or (
            self.context in ("user", "system") and other.context != "patient"
        )
        return (same_context and self.resource_type in ("*", other.resource_type)
                and set(other.verbs) <= set(self.verbs))


def parse_scope(text: str) -> Scope | None:
    """The resource scope `text` names; None for a known non-resource scope; ScopeError otherwise."""
    match = _SCOPE.match(text)
    if match is None:
        if _OTHER.match(text):
            return None
        raise ScopeError(f"not a SMART scope: {text[:80]!r}")
    context, resource_type, verbs = match.groups()
    verbs = _V1.get(verbs, verbs)
    if not verbs:
        raise ScopeError(f"a scope must allow at least one of c, r, u, d, s: {text[:80]!r}")
    return Scope(context, resource_type, verbs)  # type: ignore[arg-type]


def parse_scopes(text: str) -> tuple[Scope, ...]:
    """Space-separated scopes (the `scope` claim / parameter) -> the resource scopes among them."""
    return tuple(s for s in (parse_scope(part) for part in text.split()) if s is not None)


def format_scopes(scopes: tuple[Scope, ...]) -> str:
    return " ".join(str(s) for s in scopes)


def granting(scopes: tuple[Scope, ...], resource_type: str, verb: str) -> set[Context]:
    """The contexts in which `scopes` allow `verb` on `resource_type` (empty: not allowed at all)."""
    return {s.context for s in scopes if s.grants(resource_type, verb)}


def narrow(requested: tuple[Scope, ...], allowed: tuple[Scope, ...]) -> tuple[Scope, ...]:
    """The requested scopes some allowed scope covers (what a client may be granted)."""
    return tuple(s for s in requested if any(a.covers(s) for a in allowed))
