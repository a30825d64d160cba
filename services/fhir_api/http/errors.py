"""Every error leaves the server as an OperationOutcome with the right HTTP status."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.fhir_api.store.interface import InvalidResource, StoreError

log = logging.getLogger(__name__)
FHIR_JSON = "application/fhir+json"

# Issue type code by status, for errors raised without an explicit code.
_CODE_BY_STATUS = {
    400: "invalid",
    404: "not-found",
    405: "not-supported",
    406: "not-supported",
    409: "conflict",
    410: "deleted",
    412: "conflict",
    413: "too-costly",
    415: "not-supported",
    422: "processable",
    500: "exception",
}


class FhirHttpError(Exception):
    """A client-visible failure raised by the HTTP layer itself."""

    def __init__(
        self, status: int, message: str, *, code: str | None = None, issues: Iterable[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers  # sent with the OperationOutcome (e.g. 429's Retry-After)
        self.code = code or _CODE_BY_STATUS.get(status, "processing")
        self.issues = list(issues) if issues else [message]


def operation_outcome(messages: Iterable[str], code: str = "processing", severity: str = "error") -> dict:
    return {
        "resourceType": "OperationOutcome",
        "issue": [{"severity": severity, "code": code, "diagnostics": m} for m in messages],
    }


def outcome_bytes(messages: Iterable[str], code: str = "processing", severity: str = "error") -> bytes:
    return orjson.dumps(operation_outcome(messages, code, severity))


def outcome_response(
    status: int,
    messages: Iterable[str],
    code: str | None = None,
    severity: str = "error",
    headers: dict[str, str] | None = None,
) -> Response:
    code = code or _CODE_BY_STATUS.get(status, "processing")
    return Response(
        outcome_bytes(messages, code, severity), status_code=status, media_type=FHIR_JSON, headers=headers
    )


def as_http_error(exc: Exception) -> FhirHttpError:
    """Map a store or HTTP-layer exception onto (status, code, messages)."""
    if isinstance(exc, FhirHttpError):
        return exc
    if isinstance(exc, InvalidResource):
        return FhirHttpError(exc.status, str(exc), code=exc.code, issues=exc.issues)
    if isinstance(exc, StoreError):
        return FhirHttpError(exc.status, str(exc) or type(exc).__name__, code=exc.code)
    raise TypeError(f"not a client error: {exc!r}")


async def fhir_error(_request: Request, exc: Exception) -> Response:
    """The OperationOutcome answer to a FhirHttpError or StoreError."""
    err = as_http_error(exc)
    return outcome_response(err.status, err.issues, err.code, headers=getattr(err, "headers", None))


async def _starlette_error(_request: Request, exc: StarletteHTTPException) -> Response:
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return outcome_response(exc.status_code, [detail], headers=getattr(exc, "headers", None))


async def _validation_error(_request: Request, exc: RequestValidationError) -> Response:
    messages = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()]
    return outcome_response(400, messages or ["invalid request"], "invalid")


class CatchAll:
    """ASGI middleware: an unhandled exception becomes a 500 OperationOutcome sent as an ordinary response.

    Starlette's own last resort (an `Exception` handler, run by ServerErrorMiddleware) sends the 500 and then
    re-raises, and uvicorn answers an exception after the response started by closing the connection: the
    client's next request on its keep-alive connection failed too. Here the exception ends at the 500. Only
    when part of a response already went out is it re-raised: closing the connection is then the one way to
    tell the client its response is incomplete. app.py installs it twice: inside the interaction hook and
    admission control (they see the 500 as any response) and outermost (a fault in those layers too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:
                raise
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"), exc_info=exc)
            await outcome_response(500, ["internal server error"], "exception")(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(FhirHttpError, fhir_error)
    app.add_exception_handler(StoreError, fhir_error)
    app.add_exception_handler(StarletteHTTPException, _starlette_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
