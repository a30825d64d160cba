"""The documented URL and header limits (services/fhir_api/limits.py), enforced before anything else runs.

A pure ASGI middleware, outermost, so an over-long request costs no routing, no auth and no recording:
a URL over `MAX_URL_BYTES` answers 414, more than `MAX_HEADER_FIELDS` header fields or `MAX_HEADER_BYTES`
of them 431, each an OperationOutcome (issue code `too-long`). It also runs under in-process transports
(the simulator's assistants), where no HTTP parser stands in front of the app. The limits are stated in
the CapabilityStatement (`rest.documentation`, from `documentation()`).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from services.fhir_api.http.errors import outcome_response
from services.fhir_api.limits import (
    MAX_HEADER_BYTES,
    MAX_HEADER_FIELDS,
    MAX_SEARCH_PARAMS,
    MAX_SEARCH_VALUES,
    MAX_URL_BYTES,
)


def refusal(scope: Scope) -> tuple[int, str] | None:
    """(status, message) when the request's URL or headers are over the limits, else None."""
    raw_path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
    query = scope.get("query_string", b"")
    url = len(raw_path) + (len(query) + 1 if query else 0)
    if url > MAX_URL_BYTES:
        return 414, (f"request URL of {url} bytes; at most {MAX_URL_BYTES} are accepted "
                     "(send long searches as POST <type>/_search)")
    headers = scope.get("headers", ())
    if len(headers) > MAX_HEADER_FIELDS:
        return 431, f"{len(headers)} header fields; at most {MAX_HEADER_FIELDS} are accepted"
    size = sum(len(name) + len(value) for name, value in headers)
    if size > MAX_HEADER_BYTES:
        return 431, f"request headers of {size} bytes; at most {MAX_HEADER_BYTES} are accepted"
    return None


class RequestLimits:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = refusal(scope)
            if refused is not None:
                status, message = refused
                await outcome_response(status, [message], "too-long")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def documentation(max_body_bytes: int) -> str:
    """The limits as the CapabilityStatement states them (markdown)."""
    return (
        "Request limits: a URL (path and query, percent-encoded) of at most "
        f"{MAX_URL_BYTES} bytes (else 414); at most {MAX_HEADER_FIELDS} header fields of at most "
        f"{MAX_HEADER_BYTES} bytes in all (else 431); a body of at most {max_body_bytes} bytes (else 413); "
        f"at most {MAX_SEARCH_PARAMS} search parameters and {MAX_SEARCH_VALUES} OR alternatives in all per "
        "search or set of conditional criteria (else 400). Every refusal is an OperationOutcome."
    )
