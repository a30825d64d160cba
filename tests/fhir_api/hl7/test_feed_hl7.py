"""Must show: a whole MIMIC-IV demo admission fed as HL7 v2 over MLLP to a python-hl7 receiver — every ADT
event and every lab result of the stay arrives once after de-duplication by control id (MSH-10) across a lost
ACK, a NAK and a receiver restart, in the order they became known, none before the session's clock showed
it; and every message validates against the v2.5.1 structures with hl7apy."""

from __future__ import annotations

from datetime import datetime

import hl7
import orjson
import pytest
from hl7apy.consts import VALIDATION_LEVEL
from hl7apy.parser import parse_message
from typer.testing import CliRunner

from rounds.settings import settings_for
from services.fhir_api.hl7.er7 import from_ts
from services.fhir_api.hl7.mllp import DeliveryFailed, MllpSender
from services.fhir_api.hl7.stay import Hl7Tap, StayReader
from services.fhir_api.search.values import to_us
from services.fhir_api.store.cursor import pages
from services.fhir_api.store.interface import Context
from services.fhir_api.store.known_time import clinical_time
from services.fhir_api.subscriptions.feed import feed
from tests.fhir_api.hl7.conftest import PATIENT_OF_ADMISSION
from tests.wiring import bus_on

T0, T1 = "2148-08-14T12:00:00Z", "2148-08-19T12:00:00Z"
SPEED = 3 * 3600 / 0.01  # three clinical hours per clock move


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def expected_labs(store, session: str) -> dict[str, int]:
    """labevent_id -> known time (µs) of every lab the session sees at T1 and not at T0 (the store's own
    searches at the two clocks)."""
    params = [("patient", f"Patient/{PATIENT_OF_ADMISSION}"), ("category", "laboratory")]

    def seen(at: str) -> dict[str, dict]:
        return {r.id: orjson.loads(r.raw) for page in pages(store, Context(session, when(at)), "Observation",
                                                             params) for r in page}

    before = seen(T0)
    return {obs["identifier"][0]["value"]: clinical_time(obs) for id, obs in seen(T1).items()
            if id not in before}


def expected_adt(store, session: str) -> list[str]:
    encounters = [orjson.loads(r.raw) for page in pages(store, Context(session, when(T1)), "Encounter",
                                                        [("patient", f"Patient/{PATIENT_OF_ADMISSION}")])
                  for r in page]
    (stay,) = [e for e in encounters if e["identifier"][0]["value"] == "29600294"]
    start = when(stay["period"]["start"])
    later = [loc for loc in stay["location"] if when(loc["period"]["start"]) >= start]
    first_before = when(stay["location"][0]["period"]["start"]) < start
    return ["A04"] * first_before + ["A01"] + ["A02"] * len(later) + ["A03"]


def known_us(message: hl7.Message) -> int:
    return to_us(when(from_ts(str(message.segment("MSH")(7)))))


@pytest.mark.slow  # about 300 messages built and validated by hl7apy, and sent one ACK at a time
def test_a_whole_admission_arrives_once_in_order_never_early(admission_store, hl7_receiver):
    url, store = admission_store
    session = store.create_session(when(T0))

    def clock():
        return store.get_session(session).now

    faults = {25: "drop", 60: "AE", 140: "restart", 141: "drop"}
    receiver = hl7_receiver(clock_of=clock, misbehave=faults.get)
    sender = MllpSender("127.0.0.1", receiver.port, timeout_s=5, retry_s=30)
    tap = Hl7Tap(StayReader(store, PATIENT_OF_ADMISSION), session, sender.send)
    bus = bus_on(settings_for(url), ensure_topics=True)
    try:
        feed(store, bus, session, when(T0), when(T1), SPEED, tick_s=0.01, sleep=lambda s: None, taps=[tap])
    finally:
        bus.close()
        sender.close()

    labs, adt = expected_labs(store, session), expected_adt(store, session)
    assert len(labs) > 250 and adt[:2] == ["A04", "A01"] and adt.count("A02") >= 2
    unique = receiver.unique()
    assert receiver.restarts == 1 and len(receiver.received) > len(unique)  # duplicates were sent
    assert len(sender.nacks) >= 3  # the lost ACK, the NAK and the restart were each retried

    parsed = [hl7.parse(item.text) for item in unique]
    assert [str(m.segment("MSH")(9)(1)(2)) for m in parsed if str(m.segment("MSH")(9)(1)(1)) == "ADT"] == adt
    arrived_labs = [str(m.segment("OBR")(3)(1)(1)) for m in parsed if str(m.segment("MSH")(9)(1)(2)) == "R01"]
    assert sorted(arrived_labs) == sorted(labs)  # every lab of the stay, once
    times = [known_us(m) for m in parsed]
    assert times == sorted(times)  # in the order they became known
    for item, message, at in zip(unique, parsed, times, strict=True):
        assert at <= to_us(item.clock)  # never before the session's clock showed it
        if str(message.segment("MSH")(9)(1)(2)) == "R01":
            assert at == labs[str(message.segment("OBR")(3)(1)(1))]  # its known time is the store's
        structure = parse_message(item.text.replace("\n", "\r"), validation_level=VALIDATION_LEVEL.STRICT,
                                  find_groups=True)
        assert structure.validate(), item.control


def test_a_result_carries_codes_units_range_and_flag(admission_store, tmp_path):
    url, store = admission_store
    session = store.create_session(when(T0))
    out = tmp_path / "stay.hl7"
    result = CliRunner().invoke(_app(), ["feed", "--session", session, "--from", T0,
                                         "--to", "2148-08-16T06:00:00Z", "--speed", "1000000x",
                                         "--tick", "0.01", "--patient",
                                         f"Patient/{PATIENT_OF_ADMISSION}", "--hl7-file", str(out),
                                         "--database-url", url])
    assert result.exit_code == 0, result.output
    with out.open(newline="") as fh:  # segments end with CR: no newline translation
        messages = [hl7.parse(text) for text in hl7.split_file(fh.read())]
    assert f"{len(messages)} HL7 v2 messages sent to {out}" in result.output
    by_code = {str(m.segment("OBX")(3)(1)(1)): m for m in messages if str(m.segment("MSH")(9)(1)(2)) == "R01"}
    hemoglobin = by_code["718-7"].segment("OBX")  # LOINC where the record maps it, the itemid beside it
    assert str(hemoglobin(3)(1)(3)) == "LN" and str(hemoglobin(3)(1)(4)) == "51222"
    assert str(hemoglobin(3)(1)(6)) == "99MIMIC" and str(hemoglobin(6)) == "g/dL"
    assert str(hemoglobin(7)) == "13.7-17.5" and str(hemoglobin(8)) in {"A", "L"}
    unmapped = by_code["52172"].segment("OBX")  # RDW-SD: no LOINC in the crosswalk, the MIMIC itemid alone
    assert str(unmapped(3)(1)(3)) == "99MIMIC"


def test_a_receiver_that_never_accepts_stops_the_feed_naming_the_message(admission_store, hl7_receiver):
    url, store = admission_store
    session = store.create_session(when(T0))
    receiver = hl7_receiver(clock_of=lambda: None, misbehave=lambda n: "AE")
    sender = MllpSender("127.0.0.1", receiver.port, timeout_s=2, retry_s=1)
    tap = Hl7Tap(StayReader(store, PATIENT_OF_ADMISSION), session, sender.send)
    bus = bus_on(settings_for(url), ensure_topics=True)
    with pytest.raises(DeliveryFailed, match="not accepted.*AE"):
        feed(store, bus, session, when(T0), when(T1), SPEED, tick_s=0.01, sleep=lambda s: None, taps=[tap])
    bus.close()
    assert tap.sent == 0 and len(receiver.received) >= 2


def test_feed_refuses_hl7_without_a_patient(admission_store):
    url, store = admission_store
    session = store.create_session(when(T0))
    result = CliRunner().invoke(_app(), ["feed", "--session", session, "--from", T0, "--to", T1,
                                         "--hl7", "mllp://127.0.0.1:1", "--database-url", url])
    assert result.exit_code == 2 and "--patient" in result.output


def _app():
    from rounds.cli import app

    return app


def test_feed_cli_sends_over_mllp(admission_store, hl7_receiver):
    url, store = admission_store
    session = store.create_session(when(T0))
    receiver = hl7_receiver(clock_of=lambda: None)
    result = CliRunner().invoke(_app(), ["feed", "--session", session, "--from", T0,
                                         "--to", "2148-08-15T06:00:00Z", "--speed", "1000000x",
                                         "--tick", "0.01", "--patient", PATIENT_OF_ADMISSION,
                                         "--hl7", f"mllp://127.0.0.1:{receiver.port}", "--database-url", url])
    assert result.exit_code == 0, result.output
    kinds = [item.trigger for item in receiver.unique()]
    assert kinds[:3] == ["A04", "A01", "A02"]
    assert f"{len(kinds)} HL7 v2 messages sent to mllp://127.0.0.1:{receiver.port}" in result.output
