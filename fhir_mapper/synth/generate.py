"""`generate(out, patients, seed)`: stream a synthetic MIMIC-IV (hosp/, icu/, ed/, note/) patient by patient.

Only one patient's record is in memory at a time; rows go straight to the open gzip writers. Each patient's
random draws come from faker reseeded with (seed, patient index) and, per table generator, from a stream
of its own, so the output is a pure function of (patients, seed), patient i looks the same whatever N is,
and a change to one generator leaves the others' values alone.

A patient's ids come from blocks of its own (fhir_mapper/synth/context.py ID_BLOCKS: patient i owns the i-th
block of every sequence), so nothing carries from one patient to the next. With a `shard` (rounds/shards.py)
only that shard's patients are drawn at all: n machines each do 1/n of the work, and the union of their
tables is the single-process output row for row. The directory (dictionaries, the provider and caregiver
pools) comes from the seed alone, and every shard writes it alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fhir_mapper.ids import fhir_id
from fhir_mapper.synth.coding import write_coding, write_omr
from fhir_mapper.synth.context import SubjectSeq, SynthState, subject_id
from fhir_mapper.synth.dictionaries import write_dictionaries, write_people
from fhir_mapper.synth.ed import write_ed
from fhir_mapper.synth.icu import write_icu
from fhir_mapper.synth.labs import write_labs
from fhir_mapper.synth.meds import write_meds
from fhir_mapper.synth.micro import write_micro
from fhir_mapper.synth.notes import write_notes
from fhir_mapper.synth.tables import TableSet
from fhir_mapper.synth.timeline import build_patient, write_core
from rounds.shards import ALL, Shard


def generate(
    out: Path,
    patients: int,
    seed: int = 0,
    compresslevel: int = 4,
    progress: Callable[[int], None] | None = None,
    shard: Shard = ALL,
) -> dict[str, int]:
    """Write every schema table under `out` (`shard`'s patients, and the directory); return rows written
    per table ('hosp/labevents': n, ...). `progress` counts the patient indexes passed, the shard's or not."""
    if patients < 0:
        raise ValueError(f"patients must be >= 0, got {patients}")
    with TableSet(Path(out), compresslevel=compresslevel) as tables:
        ctx = SynthState(tables, seed)
        write_dictionaries(ctx)
        for index in range(patients):
            if shard.holds(fhir_id("Patient", str(subject_id(index)))):
                write_patient(ctx, index)
            if progress:
                progress(index + 1)
        write_people(ctx)
        return dict(tables.counts)


def write_patient(ctx: SynthState, index: int) -> None:
    """Draw patient `index` and write its rows: a function of (seed, index) alone."""
    ctx.start_patient(index)
    patient = build_patient(ctx, index)
    seq = SubjectSeq(patient.subject_id)
    write_core(ctx, patient)
    with ctx.stream("omr"):
        write_omr(ctx, patient)
    for k, adm in enumerate(patient.admissions):  # notes come last: they summarise the rest
        with ctx.stream(f"coding:{k}"):
            write_coding(ctx, patient, adm)
        with ctx.stream(f"labs:{k}"):
            write_labs(ctx, patient, adm)
        with ctx.stream(f"micro:{k}"):
            write_micro(ctx, patient, adm)
        with ctx.stream(f"meds:{k}"):
            write_meds(ctx, patient, adm, seq)
        with ctx.stream(f"icu:{k}"):
            write_icu(ctx, patient, adm)
    with ctx.stream("ed"):
        write_ed(ctx, patient)
    for k, adm in enumerate(patient.admissions):
        with ctx.stream(f"notes:{k}"):
            write_notes(ctx, patient, adm, seq)
