"""Where a build's charts are spooled: one process streams the record into a temporary spool; a build split
over machines has each shard stream its patients' charts (the costly part: every patient's searches) into a
part file, and one cheap step selects the sessions from the parts' union.

`rounds scenarios build --shard i/n --out PART` writes the spool of shard i's patients (rounds/shards.py);
`rounds scenarios build --charts PART --charts PART ... --out FILE.jsonl` merges the parts chart by chart in
Patient id order, the order one process reads them, so the sessions are byte for byte those of an unsharded
build with the same seed. A part is a spool (spool.py): a working file between the shards of one build,
written and read by this builder only, not an interchange format: read only parts you made.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from pathlib import Path

import httpx

from rounds.shards import Shard
from services.simulator.scenarios.builder import BuildError, stream_record
from services.simulator.scenarios.chart import Chart
from services.simulator.scenarios.engine import BUILDER
from services.simulator.scenarios.proposals import Proposals, Shelf, Streamed
from services.simulator.scenarios.spool import Spool, SpoolError, SpoolWriter

PART_FORMAT = "rounds-scenario-charts/2"


async def stream_into(
    client: httpx.AsyncClient, path: Path, shard: Shard, proposals: Proposals | None
) -> Streamed:
    """Stream `shard`'s charts into a new spool at `path`, proposing each chart's moments on the way when
    `proposals` is given (a build), or only spooling them (a shard's part)."""
    base = str(client.base_url)
    writer = SpoolWriter(path, {"format": PART_FORMAT, "builder": BUILDER, "shard": str(shard), "base": base})
    shelf = Shelf([])
    spooled = proposals or Proposals([])

    def take(chart: Chart) -> None:
        spooled.propose(chart, shelf.place(0, writer.add(chart)))

    try:
        read, skipped = await stream_record(client, take, shard)
    except BaseException:
        writer.abandon()
        raise
    writer.close(skipped)
    shelf.spools.append(Spool(path))
    return Streamed(base, spooled, shelf, read, skipped)


async def write_part(client: httpx.AsyncClient, out: Path, shard: Shard) -> Streamed:
    """A shard's part file at `out`, renamed into place only once complete."""
    tmp = out.with_name(f".{out.name}.partial")
    streamed = await stream_into(client, tmp, shard, None)
    streamed.shelf.close()
    tmp.replace(out)
    return streamed


def _open(path: Path) -> Spool:
    try:
        spool = Spool(path)
    except (OSError, SpoolError) as exc:
        raise BuildError(f"{path} is not a chart part ({type(exc).__name__}: {exc})") from exc
    fmt, builder = spool.header.get("format"), spool.header.get("builder")
    if fmt != PART_FORMAT or builder != BUILDER:
        spool.close()
        raise BuildError(f"{path} was written by {builder} ({fmt}); this is {BUILDER} ({PART_FORMAT})")
    return spool


def _charts(number: int, spool: Spool) -> Iterator[tuple[str, int, int, Chart]]:
    try:
        for offset, chart in spool.charts():
            yield chart.patient, number, offset, chart
    except SpoolError as exc:
        raise BuildError(f"{spool.path} is not a complete chart part: {exc}") from exc


def read_parts(paths: list[Path], proposals: Proposals) -> Streamed:
    """The union of the parts, streamed chart by chart in Patient id order (as one process reads them) into
    `proposals`; BuildError when a file is not a complete part of this builder or two parts hold the same
    patient."""
    spools = []
    try:
        for path in paths:
            spools.append(_open(path))
        shelf = Shelf(spools)
        previous, read = None, 0
        merged = heapq.merge(*(_charts(n, s) for n, s in enumerate(spools)), key=lambda t: t[0])
        for patient, number, offset, chart in merged:
            if patient == previous:
                shards = ", ".join(str(s.header.get("shard")) for s in spools)
                raise BuildError(f"the parts {shards} hold a patient twice: give each shard once")
            previous = patient
            proposals.propose(chart, shelf.place(number, offset))
            read += 1
    except BaseException:
        for spool in spools:
            spool.close()
        raise
    skipped = sorted((s for spool in spools for s in (spool.trailer or {}).get("skipped", ())),
                     key=lambda s: s["patient"])
    bases = " ".join(sorted({str(spool.header.get("base")) for spool in spools}))
    return Streamed(bases, proposals, shelf, read, skipped)
