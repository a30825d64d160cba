"""SMART on FHIR scopes (v2 `<context>/<type>.<cruds>`; v1 `.read` / `.write` / `.*` too) and what they grant.

A scope names a context (`patient`, `user`, `system`), a resource type or `*`, and the interactions it allows:
c create, r read (by id, vread, instance history), u update and patch, d delete, s search (type and system
search, history). `patient/` scopes are confined to the token's patient compartment; `user/` and `system/`
scopes are not (services/fhir_api/auth/compartment.py applies the confinement).

SMART v2 granular scopes add search-parameter constraints to one resource type:
`patient/Observation.rs?category=laboratory` allows only the Observations that search would match
(constraints.py enforces them); the parameters must be ones this server searches that type by.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlencode

from services.fhir_api.search.registry import filterable

ScopeContext = Literal["patient", "user", "system"]
VERBS = "cruds"
_V1 = {"read": "rs", "write": "cud", "*": "cruds"}
_SCOPE = re.compile(r"^(patient|user|system)/(\*|[A-Z][A-Za-z]{1,63})\.(\*|read|write|c?r?u?d?s?)"
                    r"(?:\?(.+))?$")
# Scopes a token may carry beside resource scopes (SMART launch / identity); they grant nothing here.
_OTHER = re.compile(r"^(launch(/[a-z]+)?|openid|fhirUser|profile|offline_access|online_access)$")


class ScopeError(ValueError):
    """A scope string that is not a SMART resource scope (and not a known non-resource scope)."""


@dataclass(frozen=True)
class Scope:
    context: ScopeContext
    resource_type: str  # "*" = every type
    verbs: str  # a subset of "cruds", in that order
    query: str = ""  # SMART v2 search-parameter constraint (`category=laboratory`); "": none

    def __str__(self) -> str:
        return f"{self.context}/{self.resource_type}.{self.verbs}" + (f"?{self.query}" if self.query else "")

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        """The constraint's (name, value) pairs: a resource must match them all."""
        return tuple(parse_qsl(self.query, keep_blank_values=True))

    def grants(self, resource_type: str, verb: str) -> bool:
        return verb in self.verbs and self.resource_type in ("*", resource_type)

    def covers(self, other: Scope) -> bool:
        """Everything `other` allows, this allows too (a patient/ scope never covers user/ or system/; a
        constrained scope covers only scopes constrained at least as much: its pairs among theirs)."""
        same_context = self.context == other.context or (
            self.context in ("user", "system") and other.context != "patient"
        )
        return (same_context and self.resource_type in ("*", other.resource_type)
                and set(other.verbs) <= set(self.verbs) and set(self.params) <= set(other.params))


def parse_scope(text: str) -> Scope | None:
    """The resource scope `text` names; None for a known non-resource scope; ScopeError otherwise."""
    match = _SCOPE.match(text)
    if match is None:
        if _OTHER.match(text):
            return None
        raise ScopeError(f"not a SMART scope: {text[:80]!r}")
    context, resource_type, verbs, query = match.groups()
    verbs = _V1.get(verbs, verbs)
    if not verbs:
        raise ScopeError(f"a scope must allow at least one of c, r, u, d, s: {text[:80]!r}")
    if query:
        _check_constraint(text, resource_type, query)
    return Scope(context, resource_type, verbs, query or "")  # type: ignore[arg-type]


def _check_constraint(text: str, resource_type: str, query: str) -> None:
    """A constraint names one type and only search parameters this server supports for it, with values."""
    if resource_type == "*":
        raise ScopeError(f"a search-parameter constraint needs a resource type, not '*': {text[:80]!r}")
    pairs = parse_qsl(query, keep_blank_values=True)
    if not pairs:
        raise ScopeError(f"empty search-parameter constraint: {text[:80]!r}")
    for name, value in pairs:
        if not value:
            raise ScopeError(f"the constraint {name!r} needs a value (in {text[:80]!r})")
        if not filterable(resource_type, name):
            raise ScopeError(f"{name!r} is not a search parameter of {resource_type} this server supports "
                             f"(in {text[:80]!r})")


def parse_scopes(text: str) -> tuple[Scope, ...]:
    """Space-separated scopes (the `scope` claim / parameter) -> the resource scopes among them."""
    return tuple(s for s in (parse_scope(part) for part in text.split()) if s is not None)


def format_scopes(scopes: tuple[Scope, ...]) -> str:
    return " ".join(str(s) for s in scopes)


def granting(scopes: tuple[Scope, ...], resource_type: str, verb: str) -> set[ScopeContext]:
    """The contexts in which `scopes` allow `verb` on `resource_type` (empty: not allowed at all)."""
    return {s.context for s in scopes if s.grants(resource_type, verb)}


def within(scope: Scope, ceilings: tuple[Scope, ...]) -> list[Scope]:
    """What of `scope` the ceilings allow: for each ceiling that overlaps it, the common types and verbs,
    constrained by both queries (a ceiling's `user/` or `system/` context allows the same in `patient/`)."""
    allowed: list[Scope] = []
    for ceiling in ceilings:
        if ceiling.context == "patient" and scope.context != "patient":
            continue
        if ceiling.resource_type not in ("*", scope.resource_type) and scope.resource_type != "*":
            continue
        verbs = "".join(v for v in VERBS if v in scope.verbs and v in ceiling.verbs)
        rtype = scope.resource_type if ceiling.resource_type == "*" else ceiling.resource_type
        pairs = dict.fromkeys((*scope.params, *ceiling.params))  # both constraints hold: AND, in order
        if verbs:
            allowed.append(Scope(scope.context, rtype, verbs, urlencode(list(pairs))))
    return allowed


def narrow(requested: tuple[Scope, ...], allowed: tuple[Scope, ...]) -> tuple[Scope, ...]:
    """What of the requested scopes the allowed ones allow (a client asking `system/*.cruds` when it may
    have `system/*.rs` gets `system/*.rs`), without repeats."""
    granted: list[Scope] = []
    for scope in requested:
        granted += [s for s in within(scope, allowed) if s not in granted]
    return tuple(granted)
