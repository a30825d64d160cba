"""SMART v2 search-parameter constraints on scopes (`patient/Observation.rs?category=laboratory`): a token
allows on that type only what the constraint's search matches, on every read and search.

When every scope that allows an interaction on a type carries a constraint (one unconstrained scope lifts
them), the request is held to them:
- a type search gets the constraint ANDed on, as the compartment is (several constraints on one parameter
  are ORed as one comma list: `category=laboratory` + `category=vital-signs` →
  `category=laboratory,vital-signs`; constraints no single search expresses are refused);
- a read by id (and vread, instance history) is allowed only when `<Type>?_id=<id>&<constraint>` finds it;
- what cannot be narrowed is refused with a 403 saying why: writes under a constrained scope, system search
  and history, operations, batches, and `_include` / `_revinclude` / `_has` (they would reach resources of
  a constrained type past the constraint).
"""

from __future__ import annotations

from collections.abc import Iterable

from services.fhir_api.auth.policy import Target
from services.fhir_api.auth.scopes import Scope, ScopeContext
from services.fhir_api.store.interface import Context as StoreContext
from services.fhir_api.store.interface import NotFound, SearchRequest, StoreError

Pairs = tuple[tuple[str, str], ...]
_REACHING = ("_include", "_revinclude", "_has")


class Refused(Exception):
    """The request cannot be held to the token's constraints (-> 403 with this message)."""


def constrained(scopes: Iterable[Scope]) -> bool:
    return any(s.query for s in scopes)


def constraints(scopes: Iterable[Scope], resource_type: str, verb: str, contexts: set[ScopeContext]
                ) -> list[Pairs] | None:
    """The constraints the scopes of `contexts` hold `verb` on `resource_type` to; None: unconstrained."""
    granting = [s for s in scopes if s.context in contexts and s.grants(resource_type, verb)]
    if not granting or any(not s.query for s in granting):
        return None
    return [s.params for s in granting]


def search_narrowing(sets: list[Pairs]) -> Pairs:
    """The parameters that hold a search to `sets` (any one of them may match)."""
    if len(sets) == 1:
        return sets[0]
    names = {name for pairs in sets for name, _ in pairs}
    if len(names) == 1 and all(len(pairs) == 1 for pairs in sets):
        return ((names.pop(), ",".join(dict.fromkeys(pairs[0][1] for pairs in sets))),)
    raise Refused("the token's query-constrained scopes on this type name different search parameters; "
                  "no single search is held to all of them: search with one of them")


def check(target: Target, scopes: tuple[Scope, ...], contexts: set[ScopeContext],
          parameter_names: list[str]) -> list[Pairs] | None:
    """The constraints `target` is held to (None: unconstrained); Refused when it cannot be held to them."""
    if not constrained(scopes):
        return None
    if target.interaction in ("search", "create", "update", "patch", "delete", "read"):
        if target.resource_type == "*":
            raise Refused("a token with query-constrained scopes cannot search every type at once")
        sets = constraints(scopes, target.resource_type, target.verb, contexts)
        if any(name.split(":", 1)[0] in _REACHING for name in parameter_names):
            raise Refused("_include, _revinclude and _has are refused under query-constrained scopes: they "
                          "would reach resources past the constraints")
        if sets is not None and target.verb in "cud":
            raise Refused(f"writes under a query-constrained scope ({target.resource_type}) are not "
                          "supported: ask for an unconstrained scope to write")
        return sets
    raise Refused(f"{target.interaction or 'this request'} is refused under query-constrained scopes: only "
                  "reads and searches of a type are held to them")


def stored_within(store, ctx: StoreContext, resource_type: str, id: str, sets: list[Pairs]) -> bool:
    """False only when the resource exists and none of the constraints' searches finds it (unknown or
    deleted ids are the read's own 404 / 410)."""
    try:
        for pairs in sets:
            found = store.search(ctx, SearchRequest(resource_type, [("_id", id), *pairs], count=1))
            if found.matches:
                return True
        store.read(ctx, resource_type, id)
    except (NotFound, StoreError):
        return True
    return False
