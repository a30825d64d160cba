"""Brute force against the credentials anyone on the network may try: a user's password at `/auth/login` and a
client's secret at `/auth/token`. Each guess is an attempt; a success is a guess that got through after the
limit (any answer but 429), or a correct credential. Past `auth_failed_attempts` failures per account or per
client address the server answers 429 with Retry-After — before checking anything — and the right password
works again once the window has passed. On SQLite and PostgreSQL."""

from __future__ import annotations

import time

import httpx
import pytest

from services.fhir_api.auth.clients import register_client
from services.fhir_api.auth.users import add_user
from tests.fhir_api.conftest import secured_api
from tests.security.tally import Tally

LIMIT = 5
WINDOW_S = 10.0  # long beside GUESSES requests (~0.3 s each on a loaded 2-core machine)
PASSWORD = "correct horse battery"
GUESSES = 15


def _login(http: httpx.Client, name: str, password: str, forwarded_for: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    return http.post("/auth/login", data={"username": name, "password": password},
                      headers=headers, follow_redirects=False)


def _client_token(http: httpx.Client, client_id: str, secret: str, forwarded_for: str | None = None
                  ) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    return http.post("/auth/token", auth=(client_id, secret), headers=headers,
                      data={"grant_type": "client_credentials"})


def _through_after_limit(answers: list[httpx.Response], tally: Tally, surface: str) -> None:
    """The first LIMIT wrong guesses are refused as wrong (401); every later one is 429 with Retry-After."""
    for n, answer in enumerate(answers):
        over = n >= LIMIT
        expected = 429 if over else 401
        tally.attempt(surface, answer.status_code != expected, f"guess {n}: {answer.status_code}")
        if over:
            wait = int(answer.headers.get("Retry-After", 0))
            assert 1 <= wait <= WINDOW_S + 1, [a.status_code for a in answers]


def _wait_window() -> None:
    time.sleep(WINDOW_S + 0.2)


def _login_attacks(http: httpx.Client, tally: Tally) -> None:
    # one account, one address: stopped after LIMIT; the right password is refused too while it lasts
    guesses = [_login(http, "ana", f"guess-{n}") for n in range(GUESSES)]
    _through_after_limit(guesses, tally, "login: one account")
    locked = _login(http, "ana", PASSWORD)
    tally.attempt("login: one account", locked.status_code != 429, "right password while locked")
    _wait_window()
    assert _login(http, "ana", PASSWORD).status_code == 303  # after the window, a correct login works
    # one address, many accounts (a spray, through the trusted proxy): the address is stopped
    spray = [_login(http, f"user{n}", PASSWORD, forwarded_for="198.51.100.1") for n in range(GUESSES)]
    _through_after_limit(spray, tally, "login: one address, many accounts")
    # one account, many addresses: the account is stopped
    spread = [_login(http, "ben", f"guess-{n}", forwarded_for=f"192.0.2.{n}") for n in range(GUESSES)]
    _through_after_limit(spread, tally, "login: one account, many addresses")
    # a success clears the account, never the address: a valid login does not reset an attacker's count
    for n in range(LIMIT - 1):
        assert _login(http, f"x{n}", "wrong-password", forwarded_for="203.0.113.9").status_code == 401
    assert _login(http, "ana", PASSWORD, forwarded_for="203.0.113.9").status_code == 303
    assert _login(http, "y", "wrong-password", forwarded_for="203.0.113.9").status_code == 401
    reset = _login(http, "z", "wrong-password", forwarded_for="203.0.113.9")
    tally.attempt("login: reset by a valid login", reset.status_code != 429)


def _client_attacks(http: httpx.Client, secret: str, tally: Tally) -> None:
    guesses = [_client_token(http, "backend", f"guess-{n}") for n in range(GUESSES)]
    _through_after_limit(guesses, tally, "token: client secret")
    assert all(g.json()["error"] == "temporarily_unavailable" for g in guesses[LIMIT:])
    locked = _client_token(http, "backend", secret)
    tally.attempt("token: client secret", locked.status_code != 429, "right secret while locked")
    _wait_window()
    answer = _client_token(http, "backend", secret)
    assert answer.status_code == 200 and answer.json()["access_token"], answer.text
    spread = [_client_token(http, "other", f"guess-{n}", forwarded_for=f"198.51.100.{n}")
              for n in range(GUESSES)]
    _through_after_limit(spread, tally, "token: client secret, many addresses")


@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_brute_force_is_stopped_and_the_right_credential_works_after_the_window(database_url: str) -> None:
    tally = Tally(f"rate limits ({database_url.split(':')[0]})")
    with secured_api(database_url, auth_failed_attempts=LIMIT, auth_failed_window_s=WINDOW_S,
                     trusted_proxies="127.0.0.1") as api:
        engine = api.store.engine
        for name in ("ana", "ben"):
            add_user(engine, name, PASSWORD, None)
        secret = register_client(engine, "backend", "system/*.rs")
        register_client(engine, "other", "system/*.rs")
        with httpx.Client(base_url=api.root, timeout=30) as http:
            _login_attacks(http, tally)
            _client_attacks(http, secret, tally)
    tally.assert_none(at_least=5 * GUESSES)
