"""The one hook of access control: a pure ASGI middleware in front of the FHIR app (outside the fast lane).

Off (ROUNDS_AUTH unset) it is not installed at all. On, every request but the public ones (`metadata`, SMART
discovery, the token endpoint, `/docs`, `/health`) needs `Authorization: Bearer <token>`: none or an invalid
one → 401, a valid one without the scopes → 403, both OperationOutcomes with `WWW-Authenticate`. A token bound
to a session (`session` claim) is valid only under `/sessions/<that id>/` (its FHIR base, patient and MCP
endpoints); managing the shared record and the sessions takes an unbound `user/` or `system/` token.
`patient/` scopes are confined to the token's patient (compartment.py): searches narrowed, ids checked; a
`Guard` (guard.py) left in the request state holds batch / transaction entries to the same rules and filters
what answers hold beyond the narrowed matches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson
from anyio import to_thread
from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.fhir_api.auth import compartment, constraints, smart
from services.fhir_api.auth.guard import Guard, stored_in_compartment
from services.fhir_api.auth.policy import Target, classify
from services.fhir_api.auth.scopes import ScopeContext, granting
from services.fhir_api.auth.tokens import Grant, InvalidToken, verify
from services.fhir_api.http.errors import outcome_response
from services.fhir_api.http.links import external_root
from services.fhir_api.store.interface import Context as StoreContext

REALM = 'Bearer realm="rounds"'
DISCOVERY = "/.well-known/smart-configuration"


class Denied(Exception):
    def __init__(self, status: int, message: str, error: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.error = error or ("invalid_token" if status == 401 else "insufficient_scope")


class AuthMiddleware:
    def __init__(self, app: ASGIApp, auth: Any) -> None:
        self.app, self.auth = app, auth  # auth: services.fhir_api.auth.Auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        target = classify(scope["method"], scope["path"])
        if target.kind == "public":
            if scope["path"].endswith(DISCOVERY):
                root = external_root(Request(scope), self.auth.settings)
                await JSONResponse(smart.discovery(root))(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        admitted = await self.admit(scope, receive, send, target)
        if admitted is not None:
            await self.app(scope, admitted, send)

    async def admit(self, scope: Scope, receive: Receive, send: Send, target: Target | None = None
                    ) -> Receive | None:
        """The receive to go on with, or None when the request was refused (the answer is sent)."""
        target = target or classify(scope["method"], scope["path"])
        try:
            grant = self._grant(scope)
            revocations = self.auth.revocations
            if revocations.stale:
                await to_thread.run_sync(revocations.reload)
            if revocations.is_revoked(grant.jti):
                raise Denied(401, "invalid token: it was revoked")
            _state(scope)["auth_grant"] = grant
            return await self._authorize(scope, receive, grant, target)
        except Denied as denied:
            await _deny(denied, scope, receive, send)
            return None

    def _grant(self, scope: Scope) -> Grant:
        header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        if header is None:
            raise Denied(401, "this server requires a bearer token (Authorization: Bearer ...)", error="")
        kind, _, token = header.decode("latin-1").partition(" ")
        if kind.lower() != "bearer" or not token.strip():
            raise Denied(401, "the Authorization header must be 'Bearer <token>'", error="invalid_request")
        try:
            return verify(self.auth.key, token.strip())
        except InvalidToken as exc:
            raise Denied(401, f"invalid token: {exc}") from exc

    async def _authorize(self, scope: Scope, receive: Receive, grant: Grant, target: Target) -> Receive:
        if grant.session is not None and (target.session != grant.session
                                          or target.kind not in ("fhir", "session_endpoint")):
            raise Denied(403, "this token is valid only on its own session's FHIR base "
                              f"(/sessions/{grant.session}/fhir)")
        if target.kind == "session_endpoint":
            if grant.session is None and not _unconfined(grant, "*", "c"):
                raise Denied(403, "the session endpoints need the session's token or a managing token")
            return receive
        if target.kind in ("manage", "other"):
            if not _unconfined(grant, "*", target.verb):
                raise Denied(403, f"managing sessions needs user/*.{target.verb} or system/*.{target.verb}")
            return receive
        if constraints.constrained(grant.scopes):
            receive = await self._constrain(scope, receive, grant, target)
        if target.interaction == "export":  # which types it may read: bulk/http.py, against the same grant
            if any(s.context != "patient" and "s" in s.verbs for s in grant.scopes):
                return receive
            raise Denied(403, "Bulk Data export needs user/ or system/ search scopes; a patient-confined "
                              "token cannot export")
        if target.interaction == "batch":
            if not all(granting(grant.scopes, "*", verb) & {"user", "system"} for verb in "cruds"):
                # entries are held to the scopes (and the compartment) one by one: auth/guard.py
                _state(scope)["guard"] = Guard(grant, grant.patient)
            return receive
        contexts = granting(grant.scopes, target.resource_type, target.verb)
        if contexts & {"user", "system"}:
            return receive
        if "patient" not in contexts or grant.patient is None:
            raise Denied(403, f"the token's scopes do not allow {target.interaction or target.verb} on "
                              f"{target.resource_type} (needs {target.resource_type}.{target.verb})")
        return await self._confine(scope, receive, grant, target)

    async def _confine(self, scope: Scope, receive: Receive, grant: Grant, target: Target) -> Receive:
        """Apply a `patient/` scope (compartment.decide): narrow searches, check ids, check bodies; what the
        answer holds beyond that is filtered by the guard left in the request state."""
        rtype, patient = target.resource_type, grant.patient
        assert patient is not None
        _state(scope)["guard"] = Guard(grant, patient)
        try:
            names, receive = await self._parameter_names(scope, receive, target)
            decision = compartment.decide(patient, rtype, target.interaction, target.verb, target.id,
                                          target.conditional, names)
            if decision.narrow is not None:
                _narrow(scope, target, decision.narrow)
            if decision.check_id is not None:
                await self._check_stored(scope, rtype, decision.check_id, patient)
            if not decision.body:
                return receive
            body, receive = await _buffer(receive, self.auth.max_body_bytes)
            try:
                document = orjson.loads(body) if body else None
            except orjson.JSONDecodeError:
                return receive  # the app answers the malformed body
            compartment.check_body(patient, rtype, target.interaction, document)
        except compartment.Outside as exc:
            raise Denied(403, str(exc)) from exc
        return receive

    async def _constrain(self, scope: Scope, receive: Receive, grant: Grant, target: Target) -> Receive:
        """Hold the request to the token's search-parameter constraints (constraints.py): narrow a search,
        check a read's resource, refuse what cannot be held to them. The scopes of the context the request
        is judged in (user/system, else patient) decide."""
        contexts = granting(grant.scopes, target.resource_type, target.verb)
        used: set[ScopeContext] = (contexts & {"user", "system"}) or {"patient"}
        names, receive = await self._parameter_names(scope, receive, target)
        try:
            sets = constraints.check(target, grant.scopes, used, names)
            narrowing = constraints.search_narrowing(sets) if sets and target.interaction == "search" else ()
        except constraints.Refused as exc:
            raise Denied(403, str(exc)) from exc
        for pair in narrowing:
            _narrow(scope, target, pair)
        if sets and target.interaction == "read" and target.id is not None:
            rtype, id = target.resource_type, target.id
            if not await self._stored(scope, lambda store, ctx: constraints.stored_within(store, ctx, rtype,
                                                                                            id, sets)):
                raise Denied(403, f"{rtype}/{id} is outside the token's query-constrained scopes")
        return receive

    async def _parameter_names(self, scope: Scope, receive: Receive, target: Target
                               ) -> tuple[list[str], Receive]:
        """The names of the request's search parameters: its query, If-None-Exist, and a POSTed search's
        form body (read here and replayed to the app)."""
        texts = [scope.get("query_string", b"").decode("latin-1")]
        texts += [v.decode("latin-1") for k, v in scope["headers"] if k == b"if-none-exist"]
        if target.interaction == "search" and scope["method"] == "POST":
            body, receive = await _buffer(receive, self.auth.max_body_bytes)
            texts.append(body.decode("latin-1"))
        return [name for text in texts for name, _ in parse_qsl(text, keep_blank_values=True)], receive

    async def _check_stored(self, scope: Scope, rtype: str, id: str, patient: str) -> None:
        if not await self._stored(scope, lambda store, ctx: stored_in_compartment(store, ctx, rtype, id,
                                                                                  patient)):
            raise compartment.Outside(f"outside the compartment of Patient/{patient}")

    async def _stored(self, scope: Scope, check: Callable[[Any, StoreContext], bool]) -> bool:
        """`check(store, ctx)` on the request's base, off the event loop (True when the session is unknown:
        the app answers 404 for it)."""
        store = self.auth.store
        ctx = StoreContext()
        session = scope.get("path_params", {}).get("session_id") or _session_of(scope["path"])
        if session is not None:
            ctx = await store.get_session_async(session)
            if ctx is None:
                return True
        return await to_thread.run_sync(check, store, ctx)


async def admit(auth: Any, scope: Scope, receive: Receive, send: Send) -> Receive | None:
    """Apply `auth` to a request an endpoint mounted ahead of the app receives (the MCP endpoint)."""
    return await AuthMiddleware(_nothing, auth).admit(scope, receive, send)


class SessionEndpointAuth:
    """The middleware's rules on an app that serves session endpoints apart from the FHIR app (the
    simulator's patient endpoint next to a separate `rounds serve`): `/sessions/<id>/patient|mcp` goes
    through the same `admit` as on the server (the session's token, or a managing one); the app's other
    paths (its docs, unknown ones → 404) pass, as the app holds nothing else."""

    def __init__(self, app: ASGIApp, auth: Any) -> None:
        self.app, self.auth = app, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            target = classify(scope["method"], scope["path"])
            if target.kind == "session_endpoint":
                admitted = await AuthMiddleware(_nothing, self.auth).admit(scope, receive, send, target)
                if admitted is None:
                    return
                receive = admitted
        await self.app(scope, receive, send)


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:  # pragma: no cover - never called
    raise RuntimeError("admit() does not call the app")


def _unconfined(grant: Grant, resource_type: str, verb: str) -> bool:
    """Allowed outside any patient compartment and any session."""
    contexts: set[ScopeContext] = granting(grant.scopes, resource_type, verb)
    return grant.session is None and bool(contexts & {"user", "system"})


def _session_of(path: str) -> str | None:
    if path.startswith("/sessions/"):
        return path.split("/", 3)[2]
    return None


def _state(scope: Scope) -> dict:
    return scope.setdefault("state", {})


def _narrow(scope: Scope, target: Target, param: tuple[str, str]) -> None:
    """AND `param` onto the search or conditional criteria; a create is narrowed only when conditional
    (criteria in the query or If-None-Exist), else it would become conditional on the compartment."""
    extra = urlencode([param]).encode()
    query = scope.get("query_string", b"")
    if target.interaction != "create" or query:
        scope["query_string"] = query + b"&" + extra if query else extra
    if target.interaction == "create":
        scope["headers"] = [(k, v + b"&" + extra if k == b"if-none-exist" else v)
                            for k, v in scope["headers"]]


async def _buffer(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """Read the whole body (up to `limit`; beyond it → 413) and a receive that replays it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Denied(413, f"request body larger than {limit} bytes", error="invalid_request")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


async def _deny(denied: Denied, scope: Scope, receive: Receive, send: Send) -> None:
    challenge = REALM
    if denied.error:
        description = denied.message.replace('"', "'")[:300]
        challenge += f', error="{denied.error}", error_description="{description}"'
    headers = {"WWW-Authenticate": challenge} if denied.status in (401, 403) else {}
    code = {401: "login", 403: "forbidden"}.get(denied.status, "too-costly")
    response = outcome_response(denied.status, [denied.message], code, headers=headers)
    await response(scope, receive, send)
