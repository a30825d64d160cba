"""A scenario build split over machines: each shard reads its patients' charts (the costly part: every
patient's searches) into a part file, and one cheap step selects the sessions from the parts' union.

`rounds scenarios build --shard i/n --out PART` writes the charts of shard i's patients (rounds/shards.py);
`rounds scenarios build --charts PART --charts PART ... --out FILE.jsonl` selects from them. The charts are
put back in the order one process reads them (by Patient id), so the sessions are byte for byte those of an
unsharded build with the same seed. A part is a working file between the shards of one build, written and
read by this module only (a pickle of the charts, with the builder's version checked on reading), not an
interchange format: read only parts you made.
"""

from __future__ import annotations

import gzip
import pickle
from dataclasses import dataclass
from pathlib import Path

from services.simulator.scenarios.builder import BuildError
from services.simulator.scenarios.chart import Chart
from services.simulator.scenarios.engine import BUILDER

PART_FORMAT = "rounds-scenario-charts/1"


@dataclass
class Part:
    """The charts one shard read, the patients it skipped (with the reason) and where it read them."""

    shard: str
    base: str
    charts: list[Chart]
    skipped: list[dict[str, str]]


def write_part(path: Path, part: Part) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    with gzip.open(tmp, "wb", compresslevel=3) as fh:
        pickle.dump((PART_FORMAT, BUILDER, part), fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)


def read_parts(paths: list[Path]) -> Part:
    """The union of the parts (charts in Patient id order, as one process reads them); BuildError when a
    file is not a part of this builder or two parts hold the same patient."""
    charts: list[Chart] = []
    skipped: list[dict[str, str]] = []
    bases, shards = set(), []
    for path in paths:
        try:
            with gzip.open(path, "rb") as fh:
                fmt, builder, part = pickle.load(fh)  # noqa: S301 - our own working file (module docstring)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError) as exc:
            raise BuildError(f"{path} is not a chart part ({type(exc).__name__}: {exc})") from exc
        if fmt != PART_FORMAT or builder != BUILDER:
            raise BuildError(f"{path} was written by {builder} ({fmt}); this is {BUILDER} ({PART_FORMAT})")
        charts += part.charts
        skipped += part.skipped
        bases.add(part.base)
        shards.append(part.shard)
    patients = [c.patient for c in charts]
    if len(set(patients)) != len(patients):
        raise BuildError(f"the parts {', '.join(shards)} hold a patient twice: give each shard once")
    charts.sort(key=lambda c: c.patient)
    skipped.sort(key=lambda s: s["patient"])
    return Part(",".join(shards), " ".join(sorted(bases)), charts, skipped)
