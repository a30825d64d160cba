"""Group-bys that spill to disk (bounded memory on full MIMIC) give exactly the in-memory result."""

from __future__ import annotations

from pathlib import Path

from fhir_mapper.pipeline import run_job
from fhir_mapper.spill import SpillGroups


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
