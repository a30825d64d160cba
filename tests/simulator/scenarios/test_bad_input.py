"""Bad input and faults: an empty store, patients without labs, a FHIR server answering 500 or timing out,
an interrupted write; and the same record + seed giving byte-identical files (CLI included)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from rounds.migrate import upgrade
from services.simulator.scenarios import BuildError, build_async, output
from tests.simulator.scenarios.conftest import app_for

PATIENT = {
    "resourceType": "Patient",
    "id": "p-nolabs",
    "birthDate": "2100-01-01",
    "gender": "female",
    "name": [{"family": "Patient_1"}],
    "identifier": [{"value": "1"}],
}


def _bundle(resources: list[dict]) -> dict:
    return {"resourceType": "Bundle", "type": "searchset", "entry": [{"resource": r} for r in resources]}


def test_an_empty_store_is_a_clear_error(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    app = app_for(sqlite_url)
    with pytest.raises(BuildError, match="holds no Patient resources"):
        asyncio.run(build_async(app, seed=1, sessions=4))


def test_patients_without_labs_are_reported_skipped(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    app = app_for(sqlite_url)
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        assert client.put("/fhir/Patient/p-nolabs", json=PATIENT).status_code in (200, 201)
    with pytest.raises(BuildError, match="no patient qualified") as err:
        asyncio.run(build_async(app, seed=1, sessions=4))
    assert "Patient/p-nolabs: no lab results" in str(err.value)


def _server(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://fhir.test/fhir/")


def test_a_server_answering_500_on_the_patient_list_is_a_clear_error() -> None:
    client = _server(lambda request: httpx.Response(500, text="boom"))
    with pytest.raises(BuildError, match="answered 500 to GET Patient"):
        asyncio.run(build_async(client, seed=1, sessions=4))


def test_a_server_that_times_out_is_a_clear_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    with pytest.raises(BuildError, match="timed out"):
        asyncio.run(build_async(_server(handler), seed=1, sessions=4))


def test_a_patient_whose_reads_fail_is_skipped_with_the_reason() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/Patient"):
            return httpx.Response(200, json=_bundle([PATIENT]))
        return httpx.Response(503, text="unavailable")

    with pytest.raises(BuildError, match="every patient's chart failed to read.*503"):
        asyncio.run(build_async(_server(handler), seed=1, sessions=4))


def test_a_read_that_fails_once_is_retried() -> None:
    """A busy server (one timeout, one 502) does not drop the patient: the read is tried again."""
    seen: dict[str, int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[request.url.path] = seen.get(request.url.path, 0) + 1
        if request.url.path.endswith("/Patient"):
            if seen[request.url.path] == 1:
                raise httpx.ReadTimeout("slow", request=request)
            return httpx.Response(200, json=_bundle([PATIENT]))
        if request.url.path.endswith("/Encounter") and seen[request.url.path] == 1:
            return httpx.Response(502, text="bad gateway")
        return httpx.Response(200, json=_bundle([]))

    with pytest.raises(BuildError, match="Patient/p-nolabs: no lab results"):
        asyncio.run(build_async(_server(handler), seed=1, sessions=4))
    assert seen["/fhir/Patient"] == 2 and seen["/fhir/Encounter"] == 2


def test_an_interrupted_write_leaves_no_complete_looking_file(
    tmp_path: Path, demo_build, monkeypatch
) -> None:
    out = tmp_path / "s.jsonl"
    calls = {"n": 0}
    real = output.line

    def failing(scenario):
        calls["n"] += 1
        if calls["n"] > 5:
            raise KeyboardInterrupt
        return real(scenario)

    monkeypatch.setattr(output, "line", failing)
    with pytest.raises(KeyboardInterrupt):
        output.write(out, demo_build.scenarios, demo_build.summary)
    assert not out.exists() and not output.summary_path(out).exists()
    assert list(tmp_path.iterdir()) == []


def test_another_seed_gives_other_scenarios(synthetic_app, synthetic_build) -> None:
    """(The same record and seed giving the same bytes: test_over_http.py, and the CLI test below.)"""
    other = asyncio.run(build_async(synthetic_app, seed=12, sessions=20, per_category=1))
    assert [s.id for s in other.scenarios] != [
        s.id for s in synthetic_build.scenarios[: len(other.scenarios)]
    ]


def _rounds(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rounds.cli", "scenarios", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_builds_and_shows_a_session(synthetic_url: str, synthetic_app, tmp_path: Path) -> None:
    """Also: another process (another hash seed) builds the same bytes as this one."""
    out = tmp_path / "cli.jsonl"
    res = _rounds(
        "build",
        "--database-url",
        synthetic_url,
        "--out",
        str(out),
        "--sessions",
        "9",
        "--per-category",
        "1",
        "--families",
        "lab_trend,medagentbench",
        "--seed",
        "3",
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads(output.summary_path(out).read_text())
    assert summary["by_family"] == {"lab_trend": 9, "medagentbench": 10}
    lines = out.read_text().splitlines()
    assert len(lines) == summary["sessions"] == 19
    here = asyncio.run(
        build_async(
            synthetic_app, seed=3, sessions=9, families=["lab_trend", "medagentbench"], per_category=1
        )
    )
    assert lines == [output.line(s) for s in here.scenarios]
    first = json.loads(lines[0])
    shown = _rounds("show", str(out), "--session", first["id"], "--language", "zh", timeout=120)
    assert shown.returncode == 0 and first["id"] in shown.stdout and "turn 0" in shown.stdout
    assert first["turns"][0]["text"]["zh"]["explicit"] in shown.stdout
    bad = _rounds(
        "build", "--database-url", synthetic_url, "--out", str(tmp_path / "x.jsonl"), "--families", "nope"
    )
    assert bad.returncode == 1 and "unknown families" in bad.stderr and not (tmp_path / "x.jsonl").exists()
