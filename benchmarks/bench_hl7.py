"""HL7 v2 out of a stay (`rounds feed --hl7`): one MIMIC-IV demo admission (hadm 29600294: its patient,
stay, transfers and labs, mapped by the project's mapper) fed to a local MLLP receiver that ACKs every
message. Prints the messages, the feed's wall and CPU seconds, messages/s, and the build-and-validate cost of
one message with hl7apy alone (the share of hl7apy in the feed).

    python benchmarks/bench_hl7.py [--speed-hours 3]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import socket
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT.parent / "shared" / "data" / "mimic-iv-demo" / "hosp"
HADM, PATIENT = "29600294", "cb70e6ae-90b1-562b-8ab0-467c65d18d5e"
T0, T1 = "2148-08-14T12:00:00+00:00", "2148-08-19T12:00:00+00:00"


def admission(work: Path) -> Path:
    from fhir_mapper.pipeline import run_map

    hosp = work / "mimic" / "hosp"
    hosp.mkdir(parents=True)
    for table in ("patients", "admissions", "transfers", "d_labitems"):
        (hosp / f"{table}.csv.gz").symlink_to(DEMO / f"{table}.csv.gz")
    with gzip.open(DEMO / "labevents.csv.gz", "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=reader.fieldnames, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for r in reader if r["hadm_id"] == HADM)
    (hosp / "labevents.csv.gz").write_bytes(gzip.compress(buf.getvalue().encode()))
    run_map(work / "mimic", work / "fhir", workers=1)
    return work / "fhir"


def acking_receiver() -> tuple[int, list[str]]:
    """A loopback MLLP peer answering AA to every message (Rounds' own ACK builder)."""
    from services.fhir_api.hl7.listener import ack
    from services.fhir_api.hl7.mllp import END, START, read_frame

    server = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []

    def serve() -> None:
        conn, _ = server.accept()
        buffer = bytearray()
        while True:
            try:
                text = read_frame(conn, buffer)
            except ConnectionError:
                return
            control = text.split("\r", 1)[0].split("|")[9]
            seen.append(control)
            conn.sendall(START + ack(control, "AA").encode() + END)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--speed-hours", type=float, default=3.0, help="clinical hours per clock move")
    args = parser.parse_args()
    from rounds.migrate import upgrade
    from rounds.settings import settings_for
    from services.fhir_api.hl7.messages import build
    from services.fhir_api.hl7.mllp import MllpSender
    from services.fhir_api.hl7.stay import Hl7Tap, StayReader
    from services.fhir_api.store.interface import Context
    from services.fhir_api.subscriptions.feed import feed
    from tests.wiring import bus_on, load_on, store_on

    with tempfile.TemporaryDirectory() as tmp:
        folder = admission(Path(tmp))
        url = f"sqlite:///{tmp}/rounds.sqlite"
        upgrade(url)
        load_on(url, folder, workers=1)
        store = store_on(url)
        session = store.create_session(datetime.fromisoformat(T0))
        port, seen = acking_receiver()
        sender = MllpSender("127.0.0.1", port)
        tap = Hl7Tap(StayReader(store, PATIENT), session, sender.send)
        bus = bus_on(settings_for(url), ensure_topics=True)
        wall, cpu = time.perf_counter(), time.process_time()
        report = feed(store, bus, session, datetime.fromisoformat(T0), datetime.fromisoformat(T1),
                      args.speed_hours * 3600 / 0.01, tick_s=0.01, sleep=lambda s: None, taps=[tap])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        sender.close()
        events = StayReader(store, PATIENT).events(Context(session, datetime.fromisoformat(T1)))
        started = time.process_time()
        for event in events:
            build("bench", event)
        per_message = (time.process_time() - started) / len(events)
        bus.close()
    print(f"messages sent {tap.sent} (ACKed {len(seen)}), clock moves {report.ticks}")
    print(f"feed wall {wall:.1f} s, CPU {cpu:.1f} s, {tap.sent / wall:.1f} messages/s")
    print(f"build + validate (hl7apy) {per_message * 1000:.1f} ms CPU per message")


if __name__ == "__main__":
    main()
