"""$export of the mapped MIMIC-IV demo equals the NDJSON it was loaded from, resource for resource, and
`rounds load` reads what $export wrote (round trip). Here for the session's mapped-demo store (conftest)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from rounds.cli import app as cli
from rounds.migrate import upgrade
from services.fhir_api.bulk import export
from services.fhir_api.bulk.jobs import ExportJob, JobStore
from services.fhir_api.http.validation import served_types
from services.fhir_api.store.interface import Context
from tests.wiring import store_on


def content(resource: dict) -> dict:
    """The resource without what the store stamps on a write (versionId, lastUpdated)."""
    meta = {k: v for k, v in resource.get("meta", {}).items() if k not in ("versionId", "lastUpdated")}
    out = {k: v for k, v in resource.items() if k != "meta"}
    return out | ({"meta": meta} if meta else {})


def by_type(folder: Path) -> dict[str, dict[str, dict]]:
    found: dict[str, dict[str, dict]] = defaultdict(dict)
    for path in sorted(folder.glob("*.ndjson")):
        for line in path.read_bytes().splitlines():
            resource = orjson.loads(line)
            assert resource["id"] not in found[resource["resourceType"]], (path, resource["id"])
            found[resource["resourceType"]][resource["id"]] = content(resource)
    return dict(found)


def export_all(url: str, folder: Path, types: list[str] | None = None) -> Path:
    store = store_on(url)
    jobs = JobStore(folder)
    job = ExportJob("system", "test", "2020-01-01T00:00:00Z", types=types)
    jobs.create(job)
    export.run_export(store, Context(), jobs, job, served_types())
    assert jobs.load(job.id).state == "completed", jobs.load(job.id).error
    store.engine.dispose()
    return jobs.folder(job.id)


@pytest.mark.slow
def test_export_of_the_mapped_demo_equals_the_loaded_ndjson_and_loads_back(demo_url, demo_fhir, tmp_path):
    mapped = demo_fhir
    exported = export_all(demo_url, tmp_path / "first")
    expected, got = by_type(mapped), by_type(exported)
    assert sum(map(len, expected.values())) > 10_000
    assert got.keys() == expected.keys()
    for resource_type, resources in expected.items():
        assert got[resource_type] == resources, resource_type
    # `rounds load` reads what $export wrote, and what it loaded exports the same again: every type but the
    # labs (nine in ten of the resources, compared above; loading them again is the suite's time, not news)
    again = [t for t in expected if t != "Observation"]
    files = tmp_path / "files"
    files.mkdir()
    for path in exported.glob("*.ndjson"):
        if orjson.loads(path.read_bytes().split(b"\n", 1)[0])["resourceType"] in again:
            (files / path.name).symlink_to(path)
    url = f"sqlite:///{tmp_path / 'reloaded.sqlite'}"
    upgrade(url)
    result = CliRunner().invoke(cli, ["load", "--ndjson", str(files), "--database-url", url,
                                      "--workers", "2", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert by_type(export_all(url, tmp_path / "second", again)) == {t: expected[t] for t in again}
