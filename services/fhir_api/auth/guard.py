"""Access control inside a request: batch / transaction entries and what an answer may hold.

The middleware (middleware.py) decides a REST request from its method and path. A batch or transaction is
one POST whose entries are requests of their own, and a search, history or `$everything` answer can hold
resources the request did not name (`_include`, `_revinclude`, older versions); those are decided here, by the
`Guard` the middleware leaves in the request state for the HTTP layer (http/outcome.py: `Call.guard`).

- Entries: each is held to the token's scopes and, under `patient/` scopes, to the compartment, by the same
  rules as the REST request it stands for (compartment.decide): searches and conditional criteria narrowed,
  ids checked against the stored resource, bodies checked. A refused entry is that entry's 403 in a batch;
  in a transaction it is the whole transaction's 403 (nothing is written).
- Answers: under `patient/` scopes, included resources and history versions outside the compartment are left
  out, not refused. HAPI's SearchNarrowingInterceptor narrows what a search matches the same way, and its
  consent hooks drop (rather than fail on) resources a caller may not see; FHIR lets a server return fewer
  `_include`s than exist, and an assistant asking for a patient's labs with their performers should get
  them, not a 403 because one lab also points at someone else. History pages keep their paging links but carry
  no `total` (it would count other patients' versions).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from services.fhir_api.auth import compartment
from services.fhir_api.auth.scopes import granting
from services.fhir_api.auth.tokens import Grant
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.store.interface import Context, NotFound, SearchRequest, StoredResource, StoreError

# route name (services/fhir_api/http/urls.py) -> (SMART verb, interaction as compartment.decide names them,
# conditional)
_ROUTES = {
    "search-type": ("s", "search", False), "search-type-post": ("s", "search", False),
    "history-type": ("s", "history", False), "history-system": ("s", "history", False),
    "read": ("r", "read", False), "vread": ("r", "read", False), "history-instance": ("r", "read", False),
    "everything": ("r", "everything", False),
    "create": ("c", "create", False), "update": ("u", "update", False), "patch": ("u", "patch", False),
    "conditional-update": ("u", "update", True), "conditional-patch": ("u", "patch", True),
    "delete": ("d", "delete", False), "conditional-delete": ("d", "delete", True),
}


def stored_in_compartment(store, ctx: Context, resource_type: str, id: str, patient: str) -> bool:
    """False only when a resource of that id exists and is outside the compartment (unknown, deleted or
    malformed ids are the operation's own answer: 404, 410, 400)."""
    try:
        if not compartment.indexed(resource_type):  # by the element paths, or outside: names no one else
            stored = store.read(ctx, resource_type, id)
            return compartment.visible(orjson.loads(stored.raw), patient)
        found = store.search(ctx, SearchRequest(
            resource_type, [("_id", id), compartment.narrowing(resource_type, patient)], count=1))
        if found.matches:
            return True
        store.read(ctx, resource_type, id)
    except (NotFound, StoreError):
        return True
    except orjson.JSONDecodeError:
        return False
    return False


@dataclass(frozen=True)
class Guard:
    grant: Grant
    patient: str | None  # set: `patient/` scopes confine this request to that compartment

    @property
    def filters(self) -> bool:
        return self.patient is not None

    def entry(self, call, route: str | None, resource_type: str | None, id: str | None,
              query: list[tuple[str, str]], criteria: list[tuple[str, str]] | None, body: object
              ) -> tuple[list[tuple[str, str]], list[tuple[str, str]] | None]:
        """(query, conditional-create criteria) for a batch / transaction entry, narrowed when confined;
        FhirHttpError 403 when the token may not make it. A URL matching no route is left to the operation
        (400); a route not listed here is refused (closed by default, should entries learn new routes)."""
        if route is None:
            return query, criteria
        if route not in _ROUTES:
            raise _forbidden(f"{route} is not available in a batch or transaction to this token")
        verb, interaction, conditional = _ROUTES[route]
        rtype = resource_type or "*"
        contexts = granting(self.grant.scopes, rtype, verb)
        if contexts & {"user", "system"}:
            return query, criteria
        if "patient" not in contexts or self.patient is None:
            raise _forbidden(f"the token's scopes do not allow {interaction} on {rtype} "
                             f"(needs {rtype}.{verb})")
        try:
            names = [name for name, _ in [*query, *(criteria or ())]]
            decision = compartment.decide(self.patient, rtype, interaction, verb, id, conditional, names)
            if decision.check_id is not None and not stored_in_compartment(
                    call.store, call.ctx, rtype, decision.check_id, self.patient):
                raise compartment.Outside(f"outside the compartment of Patient/{self.patient}")
            if decision.body and body is not None:
                compartment.check_body(self.patient, rtype, interaction, body)
        except compartment.Outside as exc:
            raise _forbidden(str(exc)) from exc
        if decision.narrow is not None:
            if interaction != "create":
                query = [*query, decision.narrow]
            elif criteria:
                criteria = [*criteria, decision.narrow]
        return query, criteria

    def visible_match(self, call, stored: StoredResource) -> bool:
        """Whether a search match may be in the answer: matches of compartment types are narrowed already;
        those of types outside it must name no other patient."""
        if self.patient is None or stored.resource_type == "Patient" \
                or compartment.in_compartment_types(stored.resource_type):
            return True
        return self.visible(call, stored)

    def visible(self, call, stored: StoredResource) -> bool:
        """Whether `stored` (a match, an include, a history version) may be in the answer."""
        if self.patient is None:
            return True
        if stored.deleted:  # a tombstone carries no content: judge the version it ended
            if stored.version_id <= 1:
                return False
            try:
                stored = call.store.vread(call.ctx, stored.resource_type, stored.id, stored.version_id - 1)
            except StoreError:
                return False
            if stored.deleted:
                return False
        try:
            resource = orjson.loads(stored.raw)
        except orjson.JSONDecodeError:
            return False
        return isinstance(resource, dict) and compartment.visible(resource, self.patient)


def _forbidden(message: str) -> FhirHttpError:
    return FhirHttpError(403, message, code="forbidden")
