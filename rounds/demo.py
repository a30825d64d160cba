"""`rounds demo`: the main job end to end on the embedded default.

synthetic (or given) MIMIC-IV → FHIR NDJSON → FHIR store → a session sandbox with an as-of clock, queried
the way an assistant would, every interaction recorded as events. Proves a fresh clone works with no broker
and no database server.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson
import typer

from rounds.settings import get_settings


def _first_lab_time(fhir_dir: Path) -> tuple[str, str, str]:
    """(patient id, a lab's code, when it became known) from the mapped labs, to pick a session clock.

    A result is known once it is issued (the store's clock uses the latest of a resource's clinical times)."""
    with (fhir_dir / "MimicObservationLabevents.ndjson").open("rb") as fh:
        for line in fh:
            obs = orjson.loads(line)
            if obs.get("effectiveDateTime") and obs.get("subject"):
                code = obs["code"]["coding"][0]
                return (
                    obs["subject"]["reference"].split("/")[-1],
                    f"{code['system']}|{code['code']}",
                    obs.get("issued") or obs["effectiveDateTime"],
                )
    raise RuntimeError("no lab observation with a time was mapped")


def run_demo(patients: int, seed: int, mimic: Path | None, workdir: Path, database_url: str) -> dict:
    """Run every stage; return the figures printed by the command (also used by the tests)."""
    from fastapi.testclient import TestClient

    from fhir_mapper.pipeline import run_map
    from fhir_mapper.synth.generate import generate
    from rounds.migrate import upgrade
    from services.fhir_api.app import create_app
    from services.fhir_api.backbone.wiring import install_event_backbone
    from services.fhir_api.load import load_ndjson

    figures: dict = {}
    if mimic is None:
        mimic = workdir / "mimic"
        counts = generate(mimic, patients, seed)
        figures["synthetic_rows"] = sum(counts.values())
    fhir_dir = workdir / "fhir"
    summary, _ = run_map(mimic, fhir_dir)
    figures["mapped_resources"] = summary["total_resources"]
    figures["rejected_rows"] = summary["rejected_rows"]
    upgrade(database_url)
    report = load_ndjson(database_url, fhir_dir, workers=1)
    figures["loaded_resources"] = report.resources

    patient_id, lab_code, lab_time = _first_lab_time(fhir_dir)
    settings = get_settings().model_copy(update={"database_url": database_url})
    app = create_app(settings)
    install_event_backbone(app, settings)
    with TestClient(app, base_url="http://rounds.local") as client:
        # A sandbox whose clock stops at that lab: the assistant sees the past, never the future.
        session = client.post("/sessions", json={"now": lab_time}).json()
        base = session["fhirBase"].removeprefix("http://rounds.local")
        patient = client.get(f"{base}/Patient/{patient_id}").json()
        labs = client.get(
            f"{base}/Observation", params={"patient": patient_id, "code": lab_code, "_sort": "-date"}
        ).json()
        latest = labs.get("entry", [{}])[0].get("resource", {})
        shared = client.get(
            "/fhir/Observation", params={"patient": patient_id, "code": lab_code, "_total": "accurate"}
        ).json()
        visible = client.get(
            f"{base}/Observation", params={"patient": patient_id, "code": lab_code, "_total": "accurate"}
        ).json()
        note = {
            "resourceType": "Communication",
            "status": "completed",
            "subject": {"reference": f"Patient/{patient_id}"},
            "payload": [{"contentString": "Rounds demo: lab reviewed."}],
        }
        written = client.post(f"{base}/Communication", json=note)
        leaked = client.get("/fhir/Communication", params={"subject": f"Patient/{patient_id}"}).json()
        events = client.get(f"/sessions/{session['id']}").status_code
    figures.update(
        session=session["id"],
        now=lab_time,
        patient=patient.get("name", [{}])[0].get("family"),
        latest_lab=latest.get("valueQuantity") or latest.get("valueString"),
        labs_in_record=shared.get("total"),
        labs_visible_at_now=visible.get("total"),
        session_write_status=written.status_code,
        session_write_visible_in_shared=len(leaked.get("entry", [])),
        session_status=events,
    )
    return figures


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        patients: int = typer.Option(5, "--patients", min=1, help="Synthetic patients to generate."),
        seed: int = typer.Option(1, "--seed"),
        mimic: Path | None = typer.Option(None, "--mimic", help="MIMIC-IV folder to use."),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where to write tables and NDJSON."),
        database_url: str | None = typer.Option(None, help="Default: ROUNDS_DATABASE_URL (SQLite file)."),
    ) -> None:
        """Synthesize → map → load → query a session sandbox as an assistant would (embedded default)."""
        url = database_url or get_settings().database_url
        with tempfile.TemporaryDirectory(prefix="rounds-demo-") as tmp:
            figures = run_demo(patients, seed, mimic, workdir or Path(tmp), url)
        for key, value in figures.items():
            typer.echo(f"{key:34s} {value}")
