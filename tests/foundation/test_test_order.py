"""The order the suite is handed to pytest-xdist in (tests/scheduling.py): the long modules lead the workers'
shares, balanced by their listed seconds, and the run is the same tests, each module whole and in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import scheduling
from tests.scheduling import DURATIONS, from_durations, listed_seconds, long_first, module_of, share_sizes

REPO = Path(__file__).resolve().parents[2]
SECONDS = {"t/a.py": 100.0, "t/b.py": 90.0, "t/c.py": 60.0, "t/d.py": 50.0}
# light modules first in collection order, as in the suite (contracts/, demo/ … before scenarios/)
NODEIDS = ([f"t/light{m}.py::test_{i}" for m in range(6) for i in range(5)]
           + [f"t/a.py::test_{i}" for i in range(2)] + ["t/b.py::test_0"]
           + [f"t/c.py::test_{i}[{p}]" for i in range(2) for p in ("sqlite", "postgres")]
           + [f"t/d.py::test_{i}" for i in range(3)])


def _shares(ordered: list[str], workers: int) -> list[list[str]]:
    out, start = [], 0
    for size in share_sizes(len(ordered), workers):
        out.append(ordered[start:start + size])
        start += size
    return out


def test_the_same_tests_long_modules_whole_the_others_in_collection_order() -> None:
    ordered = long_first(NODEIDS, NODEIDS, 3, SECONDS)
    assert sorted(ordered) == sorted(NODEIDS) and len(ordered) == len(NODEIDS)
    for module in SECONDS:
        where = [i for i, n in enumerate(ordered) if module_of(n) == module]
        assert where == list(range(where[0], where[0] + len(where))), f"{module} split: {ordered}"
        assert [ordered[i] for i in where] == [n for n in NODEIDS if module_of(n) == module]
    light = [n for n in NODEIDS if module_of(n) not in SECONDS]
    assert [n for n in ordered if module_of(n) not in SECONDS] == light


def test_each_share_starts_with_its_long_modules_longest_first_balanced() -> None:
    shares = _shares(long_first(NODEIDS, NODEIDS, 3, SECONDS), 3)
    # a, b, c to the three shares; d joins the share with the fewest seconds (c's, 60)
    assert [module_of(share[0]) for share in shares] == ["t/a.py", "t/b.py", "t/c.py"]
    assert [module_of(n) for n in shares[2][:7]] == ["t/c.py"] * 4 + ["t/d.py"] * 3
    assert all(module_of(n).startswith("t/light") for share in shares for n in share
               if module_of(n) not in SECONDS)
    assert [len(share) for share in shares] == share_sizes(len(NODEIDS), 3)


def test_one_worker_or_none_runs_in_collection_order() -> None:
    assert long_first(NODEIDS, NODEIDS, 1, SECONDS) == NODEIDS
    assert long_first(NODEIDS, NODEIDS, 0, SECONDS) == NODEIDS


def test_share_sizes_are_xdist_s_even_split() -> None:
    assert share_sizes(10, 3) == [3, 3, 4] and share_sizes(2, 3) == [0, 1, 1]
    assert sum(share_sizes(1657, 3)) == 1657


def test_a_listed_duration_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "durations.json"
    bad.write_text(json.dumps({"seconds": {"tests/x.py": "slow", "tests/y.py": 3}}))
    with pytest.raises(ValueError, match=r"seconds must be numbers ≥ 0: \{'tests/x.py': 'slow'\}"):
        listed_seconds(bad)


def test_every_listed_module_exists() -> None:
    missing = [m for m in listed_seconds(DURATIONS) if not (REPO / m).is_file()]
    assert not missing, f"tests/durations.json lists modules that are gone (rename or drop them): {missing}"


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


class _Config:
    def __init__(self, workerinput: dict | None) -> None:
        if workerinput is not None:
            self.workerinput = workerinput


def test_the_hook_orders_only_an_xdist_worker_s_items(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.get_plugin("rounds-test-order") is scheduling  # tests/conftest.py
    nodeids = ["tests/foundation/test_project.py::test_a", "tests/rounds/scale/test_shards.py::test_b",
               "tests/fhir_api/test_r4_examples.py::test_c", "tests/foundation/test_project.py::test_d"]
    items = [_Item(n) for n in nodeids]
    scheduling.pytest_collection_modifyitems(_Config({"workercount": 2}), items)
    assert [i.nodeid for i in items] == [nodeids[2], nodeids[0], nodeids[1], nodeids[3]]
    items = [_Item(n) for n in nodeids]
    scheduling.pytest_collection_modifyitems(_Config(None), items)  # a pytest a test started, or no xdist
    assert [i.nodeid for i in items] == nodeids


def test_durations_are_read_from_pytest_s_report_per_module() -> None:
    report = """============================= slowest durations ==============================
196.01s setup    tests/simulator/scenarios/fhir_agentbench/test_shared_file.py::test_the_shared_file_imports
30.50s call     tests/simulator/scenarios/fhir_agentbench/test_shared_file.py::test_the_shared_file_imports
12.00s call     tests/rounds/scale/test_shards.py::test_a[sqlite]
9.00s call     tests/rounds/scale/test_shards.py::test_a[postgres - two shards]
1.40s teardown tests/rounds/scale/test_shards.py::test_a[sqlite]
19.99s call     tests/fhir_api/hl7/test_feed_hl7.py::test_x
(3 durations < 0.005s hidden.  Use -vv to show these durations.)
"""
    assert from_durations(report) == {"tests/simulator/scenarios/fhir_agentbench/test_shared_file.py": 227,
                                      "tests/rounds/scale/test_shards.py": 22}
    assert list(from_durations(report, minimum=0)) == [
        "tests/simulator/scenarios/fhir_agentbench/test_shared_file.py", "tests/rounds/scale/test_shards.py",
        "tests/fhir_api/hl7/test_feed_hl7.py"]
