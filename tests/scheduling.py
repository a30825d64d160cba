"""The order the collected tests are handed to pytest-xdist in: the long modules first, dealt out so that each
worker's share of the run starts with its own.

`--dist worksteal` (scripts/test.sh) sends each worker an equal, contiguous share of the collected items and
lets an idle worker take the back half of the longest queue; it never takes the front. A module of minutes (a
whole-record build, every official R4 example) that sits late in a share, or several of them in one share,
becomes the run's tail: the other workers have finished and wait for it. So the modules tests/durations.json
lists (seconds on the CI machine) are dealt out longest first, each to the share with the fewest listed
seconds so far (longest processing time first), and lead their share; every other module keeps its
collection order and fills the shares, so what is stolen from a tail is short. A long module's items stay
together and in their order (its module fixtures are built once); a short module can straddle the end of a
share, as it could before. A module the file does not list, or one listed that no longer exists, only
changes how well the run is balanced, never what it runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import pytest

Item = TypeVar("Item")
DURATIONS = Path(__file__).with_name("durations.json")


def listed_seconds(path: Path = DURATIONS) -> dict[str, float]:
    """Module path (as in a node id) -> seconds it took on the CI machine."""
    seconds = json.loads(path.read_text())["seconds"]
    bad = {module: value for module, value in seconds.items()
           if not isinstance(value, int | float) or value < 0}
    if bad:
        raise ValueError(f"{path.name}: seconds must be numbers ≥ 0: {bad}")
    return seconds


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def share_sizes(total: int, workers: int) -> list[int]:
    """How many items each worker is sent first: worksteal splits the pending items evenly, in order."""
    sizes, left = [], total
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def long_first(items: Sequence[Item], nodeids: Sequence[str], workers: int,
               seconds: dict[str, float]) -> list[Item]:
    """`items` reordered for `workers` workers (see the module docstring); one worker or none: unchanged."""
    if workers <= 1:
        return list(items)
    modules: dict[str, list[Item]] = {}
    for item, nodeid in zip(items, nodeids, strict=True):
        modules.setdefault(module_of(nodeid), []).append(item)
    heads: list[list[str]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for module in sorted((m for m in modules if m in seconds), key=lambda m: (-seconds[m], m)):
        share = min(range(workers), key=lambda i: (load[i], i))
        heads[share].append(module)
        load[share] += seconds[module]
    rest = [item for module, its in modules.items() if module not in seconds for item in its]
    ordered: list[Item] = []
    end = 0
    for share, size in enumerate(share_sizes(len(items), workers)):
        end += size  # where this share ends; a head longer than its share pushes the next one later
        ordered += [item for module in heads[share] for item in modules[module]]
        fill = max(0, end - len(ordered))
        ordered += rest[:fill]
        rest = rest[fill:]
    return ordered + rest


@pytest.hookimpl(trylast=True)  # after -m/-k deselected: the shares are of the items that will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Registered by tests/conftest.py. Only in an xdist worker (a pytest a test starts from one inherits its
    environment, not its role); every worker collects, and must collect the same order: it depends on the
    items and the worker count only."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput:
        items[:] = long_first(items, [item.nodeid for item in items], int(workerinput["workercount"]),
                              listed_seconds())


def from_durations(report: str, minimum: float = 20.0) -> dict[str, float]:
    """Module -> seconds (setup, call and teardown of its items summed) from pytest's `--durations=0` lines
    (`12.34s call     tests/x.py::test_y`), the modules of at least `minimum` seconds, longest first. A setup
    that waited for another worker's build (tests/shared_inputs.py) counts the wait: that module starts the
    build when it leads a share."""
    seconds: dict[str, float] = {}
    for line in report.splitlines():
        parts = line.split(None, 2)  # a parametrized id may hold spaces
        if len(parts) == 3 and parts[0].endswith("s") and parts[1] in ("setup", "call", "teardown"):
            try:
                value = float(parts[0][:-1])
            except ValueError:
                continue
            module = module_of(parts[2])
            seconds[module] = seconds.get(module, 0.0) + value
    kept = {m: round(s) for m, s in seconds.items() if s >= minimum}
    return dict(sorted(kept.items(), key=lambda kv: (-kv[1], kv[0])))


if __name__ == "__main__":  # python -m tests.scheduling < the output of `scripts/test.sh --durations=0`
    import sys

    listed = from_durations(sys.stdin.read())
    data = json.loads(DURATIONS.read_text())
    DURATIONS.write_text(json.dumps({**data, "seconds": listed}, indent=2, ensure_ascii=False) + "\n")
    print(f"{DURATIONS}: {len(listed)} modules, {sum(listed.values())} s")
