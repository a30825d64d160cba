"""What a request asks for, read off its method and path: which base, which resource type, which SMART verb.

Which FHIR base (and session) a path is on comes from the server's URL grammar
(services/fhir_api/http/urls.py); the SMART verb and interaction of the path under the base are read here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from services.fhir_api.http import urls

Kind = Literal["public", "fhir", "manage", "session_endpoint", "other"]

_SESSIONS = re.compile(r"^/sessions(?:/(?P<session>[^/]+)(?P<rest>/.*)?)?/?$")
_PUBLIC = frozenset({
    "/.well-known/smart-configuration", "/.well-known/openid-configuration", "/auth/token", "/auth/authorize",
    "/auth/login", "/auth/introspect", "/auth/revoke", "/auth/jwks", "/docs",
    "/docs/oauth2-redirect", "/openapi.json", "/health",
})
_PUBLIC_UNDER_BASE = frozenset({"/metadata", "/.well-known/smart-configuration"})
_BY_METHOD = {"GET": "s", "HEAD": "s", "POST": "c", "PUT": "u", "PATCH": "u", "DELETE": "d"}


@dataclass(frozen=True)
class Target:
    kind: Kind
    session: str | None = None  # the session id in the path
    resource_type: str = "*"  # "*": system level (every type)
    verb: str = "s"  # one of c r u d s
    id: str | None = None
    interaction: str = ""  # read search create update patch delete batch everything history operation
    conditional: bool = False  # a conditional update / patch / delete (criteria in the query)


def classify(method: str, path: str) -> Target:
    if path in _PUBLIC:
        return Target("public")
    base = urls.on_base(path)
    if base is not None:
        return _fhir(method, base.session_id, base.rest)
    match = _SESSIONS.match(path)
    if match:
        session, rest = match["session"], (match["rest"] or "").rstrip("/")
        if session is None:
            return Target("manage", verb="c" if method == "POST" else "s", interaction="sessions")
        if rest == "":
            return Target("manage", session, verb={"DELETE": "d"}.get(method, "r"), interaction="session")
        if rest == "/writes":
            return Target("manage", session, verb="r", interaction="writes")
        if rest == "/end" and method == "POST":
            return Target("manage", session, verb="d", interaction="end")
        if rest in ("/patient", "/mcp") or rest.startswith("/mcp/"):
            return Target("session_endpoint", session, interaction=rest[1:].split("/")[0])
    return Target("other")


def _fhir(method: str, session: str | None, rest: str) -> Target:
    if rest in _PUBLIC_UNDER_BASE:
        return Target("public", session)
    parts = [p for p in rest.split("/") if p] if rest not in ("", "/") else []
    verb = _BY_METHOD.get(method, "s")
    if not parts:
        if method == "POST":
            return Target("fhir", session, verb="c", interaction="batch")
        return Target("fhir", session, verb=verb, interaction="search" if verb == "s" else "operation")
    head = parts[0]
    if head.startswith("$export") or parts[-1] == "$export":  # a read of many types (bulk/http.py: per type)
        return Target("fhir", session, verb="s", interaction="export")
    if head == "_history" or head.startswith("$") or head == "_search":
        kind = "history" if head == "_history" else "operation"
        return Target("fhir", session, verb=verb, interaction=kind)
    resource_type = head
    if len(parts) == 1:
        interaction = {"s": "search", "c": "create", "u": "update", "d": "delete"}[verb]
        if method == "PATCH":
            interaction = "patch"
        return Target("fhir", session, resource_type, verb, interaction=interaction,
                      conditional=verb in ("u", "d"))
    second = parts[1]
    if len(parts) == 2 and second == "_search" and method == "POST":
        return Target("fhir", session, resource_type, "s", interaction="search")
    if second == "_history":
        return Target("fhir", session, resource_type, "s", interaction="history")
    if second.startswith("$"):
        return Target("fhir", session, resource_type, verb, interaction="operation")
    if len(parts) == 3 and parts[2] == "$status":  # Subscription status: a read, whether GET or POST
        return Target("fhir", session, resource_type, "r", second, interaction="operation")
    if len(parts) == 3 and parts[2] == "$everything":
        return Target("fhir", session, resource_type, "r", second, interaction="everything")
    if len(parts) == 2:
        interaction = {"GET": "read", "HEAD": "read", "PUT": "update", "PATCH": "patch",
                       "DELETE": "delete"}.get(method, "operation")
        by_id = {"read": "r", "update": "u", "patch": "u", "delete": "d"}.get(interaction, verb)
        return Target("fhir", session, resource_type, by_id, second, interaction)
    if parts[2] == "_history":  # instance history and vread
        return Target("fhir", session, resource_type, "r", second, "read")
    return Target("fhir", session, resource_type, verb, second, interaction="operation")
