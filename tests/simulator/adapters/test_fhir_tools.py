"""The shared tool executor against a real sandbox: results, compaction, who is charged for each failure."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import httpx
import pytest

from services.simulator.assistant_protocol import (
    TOOL_NAMES,
    AssistantFailure,
    InfrastructureFailure,
    PatientFailure,
)
from services.simulator.assistants.compact import compact_bundle, compact_response, dumps
from services.simulator.assistants.fhir_tools import ToolExecutor, call_recorded, toolset
from tests.simulator.adapters.conftest import Recorder, Sandbox


def run(executor: ToolExecutor, name: str, arguments) -> object:
    return asyncio.run(executor.run(name, arguments))


def observation(patient: str, **extra) -> dict:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": "http://loinc.org", "code": "2160-0"}], "text": "Creatinine"},
        "subject": {"reference": f"Patient/{patient}"},
        "effectiveDateTime": "2180-01-01T08:00:00Z",
        "valueQuantity": {"value": 1.4, "unit": "mg/dL"},
        **extra,
    }


def test_the_tool_set_is_the_contracts_and_its_schemas_are_valid() -> None:
    spec = toolset()
    assert {t.name for t in spec.tools} == TOOL_NAMES
    assert all(t.parameters["type"] == "object" and t.description for t in spec.tools)


def test_search_returns_a_compact_bundle_of_the_sandbox(sandbox: Sandbox) -> None:
    executor = ToolExecutor(sandbox.tools(Recorder()))
    params = {"patient": sandbox.record.patient, "code": sandbox.record.lab_code, "_total": "accurate"}
    outcome = run(executor, "fhir_search", {"resourceType": "Observation", "params": params})
    assert outcome.error is None and outcome.latency_ms > 0
    bundle = outcome.output
    assert bundle["resourceType"] == "Bundle" and bundle["total"] >= 1 and bundle["returned"] >= 1
    ids = {r["id"] for r in bundle["entry"]}
    assert sandbox.record.lab_id in ids
    assert all(
        "text" not in r and set(r.get("meta", {})) <= {"versionId", "lastUpdated"} for r in bundle["entry"]
    )
    assert json.loads(outcome.for_model()) == bundle


def test_next_page_parameters_come_back_and_work(sandbox: Sandbox) -> None:
    executor = ToolExecutor(sandbox.tools(Recorder()))
    params = {"patient": sandbox.record.patient, "_count": 1}
    first = run(executor, "fhir_search", {"resourceType": "Observation", "params": params}).output
    assert first["returned"] == 1 and "next" in first
    second = run(executor, "fhir_search", {"resourceType": "Observation", "params": first["next"]}).output
    assert second["returned"] == 1 and second["entry"][0]["id"] != first["entry"][0]["id"]


def test_read_and_a_missing_resource_is_the_models_error(sandbox: Sandbox) -> None:
    executor = ToolExecutor(sandbox.tools(Recorder()))
    patient = run(executor, "fhir_read", {"resourceType": "Patient", "id": sandbox.record.patient}).output
    assert patient["resourceType"] == "Patient" and patient["id"] == sandbox.record.patient
    missing = run(executor, "fhir_read", {"resourceType": "Patient", "id": "no-such-patient"})
    assert missing.error == "HTTP 404" and missing.output is None
    assert missing.detail["resourceType"] == "OperationOutcome"
    assert json.loads(missing.for_model())["operationOutcome"]["issue"]
    bad = run(executor, "fhir_search", {"resourceType": "Observation", "params": {"date": "not-a-date"}})
    assert bad.error == "HTTP 400" and bad.detail["resourceType"] == "OperationOutcome"


def test_create_and_update_write_to_the_session_only(sandbox: Sandbox, fhir_app) -> None:
    executor = ToolExecutor(sandbox.tools(Recorder()))
    created = run(executor, "fhir_create", {"resource": observation(sandbox.record.patient)})
    assert created.error is None and created.output["status"] == 201
    kind, oid = created.output["reference"].split("/")
    assert kind == "Observation" and created.output["versionId"] == "1"
    current = run(executor, "fhir_read", {"resourceType": "Observation", "id": oid}).output
    updated = run(executor, "fhir_update", {"resource": current | {"status": "amended"}})
    assert updated.output == {"status": 200, "reference": f"Observation/{oid}", "versionId": "2"}
    assert (
        run(executor, "fhir_read", {"resourceType": "Observation", "id": oid}).output["status"] == "amended"
    )

    async def shared() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fhir_app), base_url="http://x") as c:
            return (await c.get(f"/fhir/Observation/{oid}")).status_code

    assert asyncio.run(shared()) == 404
    invalid = run(executor, "fhir_create", {"resource": {"resourceType": "Observation", "status": "bogus"}})
    assert invalid.error is not None and invalid.error.startswith("HTTP 4")
    assert invalid.detail["resourceType"] == "OperationOutcome"


def test_unknown_tools_and_repeated_garbage_are_the_assistants_fault(sandbox: Sandbox) -> None:
    executor = ToolExecutor(sandbox.tools(Recorder()))
    with pytest.raises(AssistantFailure, match="unknown tool 'drop_tables'"):
        run(executor, "drop_tables", {})
    first = run(executor, "fhir_read", "{not json")
    assert first.error.startswith("arguments are not valid JSON") and first.arguments == {"_raw": "{not json"}
    with pytest.raises(AssistantFailure, match="2 invalid tool calls"):
        run(executor, "fhir_read", {"resourceType": "Patient"})  # id missing
    fresh = ToolExecutor(sandbox.tools(Recorder()))
    schema = run(fresh, "fhir_search", {"resourceType": "observation; DROP"})
    assert "resourceType" in schema.error and "does not match" in schema.error
    not_an_object = ToolExecutor(sandbox.tools(Recorder()))
    assert run(not_an_object, "fhir_search", "[1, 2]").error == "arguments must be a JSON object"


def test_server_errors_and_dead_connections_are_infrastructure(sandbox: Sandbox) -> None:
    failing = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda request: httpx.Response(503, text="overloaded")),
        base_url=sandbox.fhir_base,
    )
    with pytest.raises(InfrastructureFailure, match="HTTP 503"):
        run(
            ToolExecutor(sandbox.tools(Recorder(), http=failing)),
            "fhir_read",
            {"resourceType": "Patient", "id": "x"},
        )
    dead = httpx.AsyncClient(base_url="http://127.0.0.1:9/fhir", timeout=2)
    with pytest.raises(InfrastructureFailure, match="ConnectError"):
        run(ToolExecutor(sandbox.tools(Recorder(), http=dead)), "fhir_search", {"resourceType": "Patient"})


def test_patient_physician_and_answer(sandbox: Sandbox) -> None:
    recorder = Recorder()

    async def physician(question: str) -> str:
        return f"I meant the most recent one ({question})"

    executor = ToolExecutor(sandbox.tools(recorder, ask_physician=physician))
    said = run(executor, "ask_patient", {"question": "Do you take your apixaban?"})
    assert said.output == recorder.patient_reply and recorder.questions == ["Do you take your apixaban?"]
    assert run(executor, "ask_physician", {"question": "Which one?"}).output.endswith("(Which one?)")
    assert run(executor, "answer", {"text": "  Creatinine 1.4 mg/dL  "}).final == "Creatinine 1.4 mg/dL"
    with pytest.raises(AssistantFailure, match="empty answer"):
        run(executor, "answer", {"text": "   "})
    lone = ToolExecutor(sandbox.tools(Recorder()))
    assert (
        run(lone, "ask_physician", {"question": "?"}).error == "the physician takes no questions in this run"
    )


def test_patient_failures_propagate_and_every_call_is_recorded(sandbox: Sandbox) -> None:
    recorder = Recorder()
    tools = sandbox.tools(recorder)

    async def broken(_: str) -> str:
        raise PatientFailure("the patient model crashed")

    executor = ToolExecutor(replace(tools, ask_patient=broken))
    ok = asyncio.run(
        call_recorded(executor, "fhir_read", {"resourceType": "Patient", "id": "nope"}, {"a": 1})
    )
    assert ok.error == "HTTP 404"
    with pytest.raises(PatientFailure):
        asyncio.run(call_recorded(executor, "ask_patient", '{"question": "How are you?"}'))
    assert [(c, n) for c, n, _ in recorder.calls] == [("c1", "fhir_read"), ("c2", "ask_patient")]
    assert recorder.calls[1][2] == {"question": "How are you?"}
    first, second = recorder.results
    assert first["error"] == "HTTP 404" and first["output"] is None and first["usage"] == {"a": 1}
    assert second["error"] == "patient_error: the patient model crashed"


def test_compaction_keeps_results_under_the_cap_and_says_what_it_left_out() -> None:
    rules = replace(toolset().rules, result_chars=2000, string_chars=50)
    resources = [
        {
            "resourceType": "Observation",
            "id": f"o{i}",
            "text": {"div": "<div>x</div>"},
            "note": [{"text": "n" * 80}],
            "meta": {"versionId": "1", "source": "s"},
        }
        for i in range(40)
    ]
    bundle = {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": 40,
        "link": [{"relation": "next", "url": "http://h/fhir/Observation?patient=p&_after=abc&_count=40"}],
        "entry": [{"resource": r, "search": {"mode": "match"}} for r in resources]
        + [{"resource": {"resourceType": "Patient", "id": "p"}, "search": {"mode": "include"}}],
    }
    summary = compact_bundle(bundle, rules)
    assert len(dumps(summary)) <= 2000
    assert summary["next"] == {"patient": "p", "_after": "abc", "_count": "40"}
    assert summary["returned"] == 40 and 0 < len(summary["entry"]) < 40
    assert summary["omitted"] == 41 - len(summary["entry"]) - len(summary.get("included", []))
    assert "narrow the search" in summary["note"]
    first = summary["entry"][0]
    assert "text" not in first and first["meta"] == {"versionId": "1"}
    assert first["note"][0]["text"] == "n" * 50 + "…[truncated 30 chars]"
    huge = compact_response({"resourceType": "Binary", "data": ["x" * 40] * 100}, rules)
    assert isinstance(huge, str) and len(huge) < 2100 and huge.endswith("chars]")
