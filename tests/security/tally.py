"""Counting attacks: every attempt is recorded under its surface with whether it succeeded, and a test ends
by printing the counts (benchmarks/README.md quotes them) and asserting that nothing succeeded."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from tests.fhir_api.conftest import LiveApi


class Tally:
    def __init__(self, name: str) -> None:
        self.name = name
        self.attempts: Counter[str] = Counter()
        self.successes: dict[str, list[str]] = {}

    def attempt(self, surface: str, succeeded: bool, what: str = "") -> bool:
        self.attempts[surface] += 1
        if succeeded:
            self.successes.setdefault(surface, []).append(what)
        return succeeded

    @property
    def total(self) -> int:
        return sum(self.attempts.values())

    def report(self) -> str:
        rows = ", ".join(f"{surface} {n}" for surface, n in sorted(self.attempts.items()))
        found = sum(len(v) for v in self.successes.values())
        return f"{self.name}: {self.total} attempts ({rows}); {found} successes"

    def assert_none(self, at_least: int) -> None:
        print(self.report())
        assert self.total >= at_least, self.report()
        assert not self.successes, {k: v[:8] for k, v in self.successes.items()}


def admin_headers(api: LiveApi) -> dict[str, str]:
    token = issue(api.app.state.auth.key, parse_scopes("system/*.cruds"), expires_in=900,
                  subject="test-admin")
    return {"Authorization": f"Bearer {token}"}


def created(api: LiveApi, body: dict, headers: dict[str, str], base: str | None = None) -> str:
    response = httpx.post(f"{base or api.fhir}/{body['resourceType']}", json=body, headers=headers)
    if response.status_code != 201:
        pytest.fail(f"seeding {body['resourceType']}: {response.status_code} {response.text[:300]}")
    return response.json()["id"]
