"""Group-bys that spill to disk (bounded memory on full MIMIC) give exactly the in-memory result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fhir_mapper.pipeline import run_job
from fhir_mapper.spill import SpillGroups

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane


def test_spill_groups_merge_partials_across_partitions(tmp_path: Path):
    groups = SpillGroups(lambda a, b: a + b, limit=10, partitions=3, directory=tmp_path)
    for i in range(1000):
        groups.add(i % 37, 1)
    merged = dict(groups.items())
    assert groups.spills > 50 and len(merged) == 37 and sum(merged.values()) == 1000
    assert merged[0] == 28 and merged[36] == 27
    assert not any(tmp_path.iterdir())  # temporary partitions are removed


def test_spilled_medication_and_micro_jobs_equal_in_memory(demo_dir: Path, tmp_path: Path):
    for job in ("medication", "microbiology"):
        small, large = tmp_path / f"{job}-spilled", tmp_path / f"{job}-memory"
        small.mkdir()
        large.mkdir()
        spilled = run_job(job, demo_dir, small, 0, group_limit=50)
        in_memory = run_job(job, demo_dir, large, 0)
        assert spilled.written == in_memory.written
        for name in in_memory.written:
            assert sorted((small / name).read_bytes().splitlines()) == sorted(
                (large / name).read_bytes().splitlines()
            ), name


class _Box:  # marshal refuses instances of user classes: those blocks are pickled
    def __init__(self, n: int) -> None:
        self.n = n


def test_spilled_blocks_keep_types_and_fall_back_to_pickle(tmp_path: Path):
    def merge(a: list, b: list) -> list:
        a[1].extend(b[1])
        a[2].update(b[2])
        return a

    plain = SpillGroups(merge, limit=7, partitions=4, directory=tmp_path)
    boxed = SpillGroups(lambda a, b: _Box(a.n + b.n), limit=7, partitions=4, directory=tmp_path)
    for i in range(200):
        plain.add(("k", i % 9), [(str(i % 9), None, 1.5), [i], {f"o{i % 2}": [i, None]}])
        boxed.add(i % 9, _Box(i))
    merged = dict(plain.items())
    assert plain.spills > 20 and len(merged) == 9
    first, items, by_ordinal = merged[("k", 4)]
    assert first == ("4", None, 1.5) and isinstance(first, tuple)  # tuples stay tuples
    assert sorted(items) == list(range(4, 200, 9)) and set(by_ordinal) == {"o0", "o1"}
    totals = {k: v.n for k, v in boxed.items()}
    assert boxed.spills > 20 and totals == {k: sum(range(k, 200, 9)) for k in range(9)}


_CYCLES = """
import gc, sys
from pathlib import Path
from fhir_mapper.jobs import JOBS
from fhir_mapper.pipeline import run_job
from fhir_mapper.synth.generate import generate
root = Path(sys.argv[1])
generate(root / "mimic", 12, seed=3)
gc.collect()
gc.disable()
for name in JOBS:
    (root / name).mkdir()
    report = run_job(name, root / "mimic", root / name, 0, group_limit=200)  # spills too
    print(name, bool(report.written), gc.isenabled(), gc.collect())
gc.enable()
run_job("core", root / "mimic", root / "core-again", 0)
print("collector", gc.isenabled())
"""


def test_jobs_leave_no_cyclic_garbage_and_restore_the_collector(tmp_path: Path):
    """run_job pauses the cyclic collector: that is only safe while jobs build no reference cycles. Counted
    in a fresh interpreter: threads other tests left in this one (broker clients, servers) make cyclic
    garbage of their own while the collector is paused."""
    from fhir_mapper.jobs import JOBS

    out = subprocess.run([sys.executable, "-c", _CYCLES, str(tmp_path)], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    jobs = dict((line.split()[0], line.split()[1:]) for line in out if line.strip())
    assert set(JOBS) <= set(jobs)
    for name in JOBS:
        written, enabled, cycles = jobs[name]
        assert written == "True" and enabled == "False", f"job {name}: written {written}, collector {enabled}"
        assert cycles == "0", f"job {name} left {cycles} objects in reference cycles"
    assert jobs["collector"] == ["True"]


_ORDER = """
from fhir_mapper.spill import SpillGroups
groups = SpillGroups(lambda a, b: a + b, limit=7, partitions=5)
for i in range(500):
    groups.add((f"patient-{i % 41}", i % 3), [i])
print([key for key, _ in groups.items()])
"""


def test_spilled_order_is_the_same_in_every_process():
    """Output order after a spill must not follow the per-process string hash salt."""
    orders = {
        subprocess.run(
            [sys.executable, "-c", _ORDER],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(orders) == 1 and "patient-40" in orders.pop()
