"""HL7 v2 in: `rounds hl7 listen` (its own process) takes a connector's ORU^R01 and ADT messages, sent with
python-hl7's MLLP client, into a session of a live FHIR API; each is acknowledged (AA / AE / AR with the
reason) and what was written is read back through the session's FHIR base, and only there."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import hl7
import httpx
import pytest
from hl7.mllp import open_hl7_connection

from tests.fhir_api.conftest import free_port
from tests.fhir_api.subscriptions.conftest import live_with_changes

CONTROL = "urn:rounds:hl7:msh-10"
NOW = "2148-08-19T12:00:00Z"


def oru(control: str, subject: str = "10014354", value: str = "7.9") -> str:
    return "\r".join([
        f"MSH|^~\\&|LIS|LAB|ROUNDS|MIMIC-IV|21480817080000-0400||ORU^R01^ORU_R01|{control}|P|2.5.1",
        f"PID|||{subject}^^^MIMIC^MR||Patient_{subject}",
        "PV1||I|||||||||||||||||29600294",
        "OBR|1||9000001^LIS|17861-6^Calcium^LN|||21480817070000-0400",
        f"OBX|1|NM|17861-6^Calcium [Mass/volume] in Serum or Plasma^LN^50893^Calcium, Total^99MIMIC||{value}"
        "|mg/dL|8.4-10.3|L|||F|||21480817070000-0400|||||21480817075500-0400",
        "OBX|2|TX|48767-8^Annotation comment^LN||Hemolyzed specimen \\T\\ repeat advised||||||F",
    ]) + "\r"


def adt(control: str, trigger: str, visit: str, extra_pv1: str = "", evn: str = "") -> str:
    structure = {"A01": "ADT_A01", "A02": "ADT_A02", "A03": "ADT_A03", "A08": "ADT_A01"}[trigger]
    return "\r".join([
        f"MSH|^~\\&|ADT|HOSP|ROUNDS|MIMIC-IV|21480817080000-0400||ADT^{trigger}^{structure}|{control}|P|2.5.1",
        f"EVN|{trigger}|{evn}||||{evn}",
        "PID|||10014354^^^MIMIC^MR||Patient_10014354",
        f"PV1||I|{extra_pv1}||||||||||||||||{visit}",
    ]) + "\r"


async def exchange(port: int, texts: list[str]) -> list[hl7.Message]:
    reader, writer = await open_hl7_connection("127.0.0.1", port)
    acks = []
    for text in texts:
        writer.writemessage(hl7.parse(text))
        await writer.drain()
        acks.append(await asyncio.wait_for(reader.readmessage(), 30))
    writer.close()
    return acks


def msa(ack: hl7.Message) -> tuple[str, str, str]:
    segment = ack.segment("MSA")
    return str(segment(1)), str(segment(2)), ack.unescape(str(segment(3))) if len(segment) > 3 else ""


@pytest.fixture(scope="module")
def listening(admission_store) -> Iterator[tuple[str, int]]:
    """(session FHIR base, MLLP port) of `rounds hl7 listen` on a live API over the admission."""
    from rounds.settings import settings_for
    from tests.wiring import bus_on

    url, _ = admission_store
    from events.bus import TopicSpec

    bus = bus_on(settings_for(url), ensure_topics=True)
    topic = f"test.hl7.{uuid.uuid4().hex[:6]}"
    bus.ensure_topics([TopicSpec(topic, 1)])
    with live_with_changes(url, bus, topic) as (api, _store):
        session = httpx.post(f"{api.root}/sessions", json={"now": NOW}).json()
        port = free_port()
        code = "from rounds.cli import app; app()"
        listener = subprocess.Popen([sys.executable, "-c", code, "hl7", "listen", "--session", session["id"],
                                     "--port", str(port), "--base-url", api.root],
                                    env={**os.environ, "ROUNDS_DATABASE_URL": url})
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and listener.poll() is None, "the listener did not start"
                time.sleep(0.2)
        try:
            yield session["fhirBase"], port, api.root
        finally:
            listener.terminate()
            listener.wait(10)
    bus.close()


def test_a_result_is_acknowledged_and_read_back_through_the_session(listening):
    base, port, root = listening
    control = uuid.uuid4().hex[:20]
    first, again = asyncio.run(exchange(port, [oru(control), oru(control)]))
    assert msa(first) == ("AA", control, "") and msa(again)[:2] == ("AA", control)
    found = httpx.get(f"{base}/Observation", params={"identifier": f"{CONTROL}|{control}/1"}).json()
    assert len(found.get("entry", ())) == 1  # sent twice, written once
    obs = found["entry"][0]["resource"]
    assert obs["valueQuantity"] == {"value": 7.9, "unit": "mg/dL"}
    assert obs["code"]["coding"][0] == {"system": "http://loinc.org", "code": "17861-6",
                                        "display": "Calcium [Mass/volume] in Serum or Plasma"}
    assert obs["referenceRange"][0]["low"]["value"] == 8.4
    assert obs["interpretation"][0]["coding"][0]["code"] == "L"
    assert obs["subject"]["reference"] == "Patient/cb70e6ae-90b1-562b-8ab0-467c65d18d5e"
    assert obs["encounter"]["reference"] == "Encounter/cf839c93-8b18-58e1-be0d-61e0581ccde7"
    assert obs["issued"].startswith("2148-08-17T07:55:00")
    note = httpx.get(f"{base}/Observation", params={"identifier": f"{CONTROL}|{control}/2"}).json()
    assert note["entry"][0]["resource"]["valueString"] == "Hemolyzed specimen & repeat advised"
    shared = httpx.get(f"{root}/fhir/Observation", params={"identifier": f"{CONTROL}|{control}/1"}).json()
    assert not shared.get("entry")  # the connector's writes stay in its session


def test_a_visit_is_opened_moved_and_closed(listening):
    base, port, _ = listening
    visit = str(90000000 + uuid.uuid4().int % 1000000)
    acks = asyncio.run(exchange(port, [
        adt("adm-" + visit, "A01", visit, "Emergency Department", "21480817090000-0400"),
        adt("trf-" + visit, "A02", visit, "MICU^^^^^^^^Medical Intensive Care Unit", "21480817110000-0400"),
        adt("dis-" + visit, "A03", visit, "", "21480818100000-0400"),
    ]))
    assert [msa(a)[0] for a in acks] == ["AA", "AA", "AA"], [msa(a) for a in acks]
    (entry,) = httpx.get(f"{base}/Encounter", params={
        "identifier": f"http://mimic.mit.edu/fhir/mimic/identifier/encounter-hosp|{visit}"}).json()["entry"]
    encounter = entry["resource"]
    assert encounter["status"] == "finished"
    assert encounter["period"] == {"start": "2148-08-17T09:00:00-04:00", "end": "2148-08-18T10:00:00-04:00"}
    assert [loc["location"]["display"] for loc in encounter["location"]] == [
        "Emergency Department", "Medical Intensive Care Unit"]


def test_what_cannot_be_taken_is_refused_with_the_reason(listening):
    _, port, _ = listening
    unknown, not_a_number, unsupported, closing = asyncio.run(exchange(port, [
        oru("c-unknown", subject="99999999"),
        oru("c-nan", value="high"),
        adt("c-a08", "A08", "29600294"),
        adt("c-a03", "A03", "12345678"),
    ]))
    assert msa(unknown)[:2] == ("AE", "c-unknown") and "unknown patient 99999999" in msa(unknown)[2]
    assert msa(not_a_number)[0] == "AE" and "not a number" in msa(not_a_number)[2]
    assert msa(unsupported)[0] == "AR" and "ADT^A08 is not taken" in msa(unsupported)[2]
    assert msa(closing)[0] == "AE" and "unknown visit 12345678" in msa(closing)[2]
    assert "unknown patient" in str(unknown.segment("ERR")(8))
