"""CORS (services/fhir_api/http/cors.py): which origins get answers they can read, preflights ahead of auth,
and the SMART configuration's `cors` following the setting. The browser side is test_smart_js.py."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.http.cors import LOOPBACK, origins
from tests.wiring import app_on


def app_with(tmp_path, cors: str) -> TestClient:
    url = f"sqlite:///{tmp_path / 'cors.sqlite'}"
    upgrade(url)
    settings = Settings(database_url=url, auth=True, bulk_dir=str(tmp_path), cors_origins=cors)
    return TestClient(app_on(settings))


def preflight(client: TestClient, path: str, origin: str, method: str = "GET"):
    return client.options(path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": "authorization, content-type"})


@pytest.mark.parametrize("path", ["/fhir/metadata", "/fhir/Patient", "/sessions/s1/fhir/Observation/x",
                                  "/auth/token", "/.well-known/smart-configuration", "/sessions"])
def test_loopback_default_answers_preflights_without_a_token(tmp_path, path):
    client = app_with(tmp_path, "loopback")
    answer = preflight(client, path, "http://localhost:3000", "POST")
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "authorization" in answer.headers["access-control-allow-headers"].lower()
    assert preflight(client, path, "http://evil.example").status_code == 400  # not an allowed origin


def test_errors_are_readable_and_security_says_cors(tmp_path):
    client = app_with(tmp_path, "loopback")
    denied = client.get("/fhir/Patient", headers={"Origin": "http://127.0.0.1:8000"})
    assert denied.status_code == 401
    assert denied.headers["access-control-allow-origin"] == "http://127.0.0.1:8000"
    assert "WWW-Authenticate" in denied.headers["access-control-expose-headers"]
    assert client.get("/fhir/metadata").json()["rest"][0]["security"]["cors"] is True
    assert "access-control-allow-origin" not in client.get("/fhir/metadata",
                                                           headers={"Origin": "http://evil.example"}).headers


def test_listed_origins_only_and_off(tmp_path):
    listed = app_with(tmp_path, "https://app.example:8443, https://other.example")
    assert preflight(listed, "/fhir/Patient", "https://app.example:8443").status_code == 200
    assert preflight(listed, "/fhir/Patient", "http://localhost:3000").status_code == 400
    off = app_with(tmp_path, "off")
    answer = preflight(off, "/fhir/Patient", "http://localhost:3000")
    assert "access-control-allow-origin" not in answer.headers
    assert off.get("/fhir/metadata").json()["rest"][0]["security"]["cors"] is False


def test_origins_setting():
    assert origins("loopback") == ((), LOOPBACK)
    assert origins("*") == (("*",), None)
    assert origins("off") is None and origins("") is None
    assert origins("https://a.example/") == (("https://a.example",), None)
    for bad in ("a.example", "https://a.example/app", "ftp://a.example"):
        with pytest.raises(ValueError, match="not an origin"):
            origins(bad)
