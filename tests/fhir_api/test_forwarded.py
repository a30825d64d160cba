"""Forwarded headers: a client's spoofed X-Forwarded-* / Forwarded changes no link unless the peer
is a configured trusted proxy (ROUNDS_TRUSTED_PROXIES); ROUNDS_BASE_URL wins over both. Over HTTP, against the
live server (which, like `rounds serve`, runs uvicorn without its own proxy-header rewriting), and against
`rounds serve` itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from pydantic import ValidationError

from rounds.settings import Settings
from services.fhir_api.http.forwarded import is_trusted, trusted_networks
from tests.fhir_api.conftest import free_port, patient

SPOOFS = [
    {"X-Forwarded-Host": "evil.example"},
    {"X-Forwarded-Proto": "https"},
    {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example", "X-Forwarded-Prefix": "/x"},
    {"Forwarded": "for=1.2.3.4;proto=https;host=evil.example"},
    {"X-Forwarded-Host": "evil.example", "X-Forwarded-Port": "8443"},
    {"X-Forwarded-Prefix": "/evil"},
]


@contextmanager
def configured(api, **changes) -> Iterator[None]:
    """The live app with some settings changed for the duration (the fixture's server is shared)."""
    settings = api.app.state.settings
    api.app.state.settings = settings.model_copy(update=changes)
    try:
        yield
    finally:
        api.app.state.settings = settings


def every_link(client: httpx.Client, tag: str, headers: dict[str, str]) -> list[str]:
    """Every absolute URL the server hands out on a few interactions made with `headers`: search Bundle links
    and fullUrls, a create's Location, a session's fhirBase, the CapabilityStatement's implementation url."""
    created = client.post("/Patient", json=patient(tag), headers=headers)
    assert created.status_code == 201, created.text
    bundle = client.get("/Patient", params={"identifier": f"urn:test|{tag}", "_count": 1}, headers=headers)
    doc = bundle.json()
    root = str(client.base_url).rsplit("/fhir", 1)[0]
    session = httpx.post(f"{root}/sessions", json={"now": "2150-01-01"}, headers=headers).json()
    metadata = client.get("/metadata", headers=headers).json()
    return [created.headers["location"], *(link["url"] for link in doc["link"]),
            *(entry["fullUrl"] for entry in doc["entry"]), session["fhirBase"],
            metadata["implementation"]["url"]]


def test_spoofed_forwarded_headers_change_no_link_by_default(client, api, tag):
    assert api.app.state.settings.trusted_proxies is None  # the default trusts nobody
    for headers in SPOOFS:
        links = every_link(client, tag, headers)
        assert all(url.startswith(api.root + "/") for url in links), (headers, links)


def test_forwarded_headers_from_a_peer_outside_the_trusted_networks_are_ignored(client, api, tag):
    with configured(api, trusted_proxies="10.0.0.0/8, 192.168.1.7"):
        for headers in SPOOFS:
            links = every_link(client, tag, headers)
            assert all(url.startswith(api.root + "/") for url in links), (headers, links)


def test_a_trusted_proxy_sets_the_links(client, api, tag):
    with configured(api, trusted_proxies="10.0.0.0/8,127.0.0.1"):
        links = every_link(client, tag, {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "ehr.example.org",
                                         "X-Forwarded-Prefix": "/rounds/"})
        assert all(url.startswith("https://ehr.example.org/rounds/") for url in links), links
        # RFC 7239 wins over the X- headers; of several hops the last (the trusted peer's own) counts
        links = every_link(client, tag, {
            "Forwarded": 'for=9.9.9.9;host=evil.example, for=1.2.3.4;proto=https;host="ehr.example.org"',
            "X-Forwarded-Host": "other.example"})
        assert all(url.startswith("https://ehr.example.org/") for url in links), links
        links = every_link(client, tag, {"X-Forwarded-Host": "evil.example, ehr.example.org",
                                         "X-Forwarded-Port": "8443"})
        assert all(url.startswith("http://ehr.example.org:8443/") for url in links), links
        links = every_link(client, tag, {"X-Forwarded-Prefix": "/rounds"})  # path routing on the same host
        assert all(url.startswith(api.root + "/rounds/") for url in links), links
        # a value that cannot be part of a URL is not pasted into one: the request's own root applies
        for bad in ({"X-Forwarded-Host": "evil.example/path"}, {"X-Forwarded-Proto": "javascript"},
                    {"X-Forwarded-Host": "a b"}, {"X-Forwarded-Prefix": "/x?y"}):
            links = every_link(client, tag, {"X-Forwarded-Proto": "https", **bad})
            assert all(url.startswith(api.root + "/") for url in links), (bad, links)


def test_trust_everyone_with_a_star(client, api, tag):
    with configured(api, trusted_proxies="*"):
        links = every_link(client, tag, {"X-Forwarded-Host": "ehr.example.org"})
    assert all(url.startswith("http://ehr.example.org/") for url in links), links


def test_the_configured_base_url_wins_over_a_trusted_proxy(client, api, tag):
    with configured(api, trusted_proxies="127.0.0.1", base_url="https://public.example/ehr/"):
        links = every_link(client, tag, {"X-Forwarded-Proto": "http", "X-Forwarded-Host": "evil.example",
                                         "Forwarded": "proto=http;host=evil.example"})
    assert all(url.startswith("https://public.example/ehr/") for url in links), links


def test_trusted_networks_parsing():
    networks = trusted_networks("127.0.0.1, 10.0.0.0/8 ,::1,fd00::/8")
    assert is_trusted("127.0.0.1", networks) and is_trusted("10.20.30.40", networks)
    assert is_trusted("::ffff:10.1.2.3", networks)  # IPv4 peer on a dual-stack socket
    assert is_trusted("::1", networks) and is_trusted("fd00::5", networks)
    assert not is_trusted("11.0.0.1", networks) and not is_trusted("::2", networks)
    assert not is_trusted(None, networks) and not is_trusted("not-an-ip", networks)
    assert trusted_networks("*") is None and is_trusted("203.0.113.9", None)
    assert Settings(trusted_proxies="  ").trusted_proxies is None
    for bad in ("10.0.0.0/33", "localhost", "1.2.3"):
        with pytest.raises(ValidationError):
            Settings(trusted_proxies=bad)


def test_rounds_serve_does_not_let_uvicorn_trust_loopback_forwarded_headers(tmp_path):
    """uvicorn alone rewrites the scheme from X-Forwarded-Proto sent from 127.0.0.1 (its default
    FORWARDED_ALLOW_IPS); `rounds serve` must not, or any local client could turn every link into https."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("ROUNDS_BASE_URL", "ROUNDS_TRUSTED_PROXIES")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rounds.cli", "serve", "--database-url", f"sqlite:///{tmp_path / 's.sqlite'}",
         "--port", str(port)],
        env={**env, "FORWARDED_ALLOW_IPS": "*"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{root}/health")
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "rounds serve did not come up"
                time.sleep(0.2)
        with httpx.Client(base_url=f"{root}/fhir", timeout=60) as client:
            for headers in SPOOFS:
                links = every_link(client, "serve", headers)
                assert all(url.startswith(root + "/") for url in links), (headers, links)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
