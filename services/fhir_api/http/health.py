"""`GET /health`: the process's health as its parts report it (200 healthy, 503 not), with their counters.

Parts register a check in `app.state.health_checks` (name -> callable returning `(healthy, details)`); the
event wiring registers the interaction recorder's, so a recording failure is visible here and not only in
the log.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]
router = APIRouter(tags=["operations"])


def collector_check() -> tuple[bool, dict[str, Any]]:
    """A served process keeps Python's cycle collector on (foundation/gcpause.py): off, garbage in cycles
    would pile up for as long as it stays off."""
    return gc.isenabled(), {"gcEnabled": gc.isenabled(), "gcFrozen": gc.get_freeze_count(),
                            "gcCollections": [generation["collections"] for generation in gc.get_stats()]}


@router.get("/health", summary="process health: 200 when every registered check passes, else 503")
async def health(request: Request) -> JSONResponse:
    checks: dict[str, HealthCheck] = getattr(request.app.state, "health_checks", {})
    results = {}
    for name, check in checks.items():
        healthy, details = check()
        results[name] = {"healthy": healthy, **details}
    ok = all(result["healthy"] for result in results.values())
    body = {"status": "ok" if ok else "unhealthy", "checks": results}
    return JSONResponse(body, status_code=200 if ok else 503)
