"""What the scenario builder keeps of the record while it streams it: per definition, each moment its anchor
proposed as three numbers (which chart, which of that chart's moments, the anchor value the seeded order
looks at), and where each chart lies in its spool. Charts themselves come back from the spool (spool.py) only
when the selection evaluates one of their moments, at most `Shelf.CAPACITY` at a time, so the memory a build
needs grows with the moments, not with the charts.

A moment is found again by recomputing its chart's moments for the definition (anchors.py is a pure function
of the chart), so the selection sees the very Moment it would have seen with every chart in memory."""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from dataclasses import dataclass

from services.simulator.scenarios.anchors import moments
from services.simulator.scenarios.bindings import Moment
from services.simulator.scenarios.chart import Chart
from services.simulator.scenarios.families import Definition
from services.simulator.scenarios.spool import Spool


class Candidates:
    """One definition's moments over the record in read order (chart by chart, then as the anchor lists
    them): parallel arrays, 16 bytes a moment."""

    def __init__(self) -> None:
        self.chart = array("I")  # the chart's number (Shelf)
        self.index = array("I")  # its place in moments(defn, chart)
        self.value = array("d")  # the anchor value; NaN when the moment has none

    def __len__(self) -> int:
        return len(self.chart)

    def add(self, number: int, found: list[Moment]) -> None:
        for i, m in enumerate(found):
            self.chart.append(number)
            self.index.append(i)
            self.value.append(math.nan if m.anchor_value is None else m.anchor_value)

    def below(self, k: int, bound: float) -> bool:
        """The k-th moment's anchor value is below `bound` (a moment without one never is)."""
        return self.value[k] < bound  # NaN compares False


class Proposals:
    """Every selected definition's candidates, filled one chart at a time (`propose`)."""

    def __init__(self, definitions: list[Definition]) -> None:
        self.definitions = definitions
        self.of: dict[str, Candidates] = {d.id: Candidates() for d in definitions}

    def propose(self, chart: Chart, number: int) -> None:
        for defn in self.definitions:
            self.of[defn.id].add(number, moments(defn, chart))


class Shelf:
    """The charts of a build by number (read order): where each lies (which spool, which offset), and the few
    most recently used, held with the moments already computed from them."""

    # A selection tries ~1,200 moments for the default 324 + 9 x 30 sessions, spread over patients: a shelf
    # that holds a small record's every chart (the MIMIC-IV demo's 100) reads each back once; a larger
    # record reads back about one chart per moment tried (~4 ms each, synthetic), a cost that does not
    # grow with the record. 128 synthetic charts are ~27 MB.
    CAPACITY = 128

    def __init__(self, spools: list[Spool]) -> None:
        self.spools = spools
        self._spool = array("H")
        self._offset = array("q")
        self._held: OrderedDict[int, tuple[Chart, dict[str, list[Moment]]]] = OrderedDict()
        self.loads = 0  # charts read back from a spool (a measure of the selection's disk reads)

    def __len__(self) -> int:
        return len(self._offset)

    def place(self, spool: int, offset: int) -> int:
        """Record where the next chart lies; its number."""
        self._spool.append(spool)
        self._offset.append(offset)
        return len(self._offset) - 1

    def moment(self, defn: Definition, number: int, index: int) -> Moment:
        """The `index`-th moment `defn`'s anchor proposes on chart `number`."""
        held = self._held.get(number)
        if held is None:
            chart = self.spools[self._spool[number]].load(self._offset[number])
            self.loads += 1
            held = self._held[number] = (chart, {})
            while len(self._held) > self.CAPACITY:
                self._held.popitem(last=False)
        else:
            self._held.move_to_end(number)
        chart, found = held
        if defn.id not in found:
            found[defn.id] = moments(defn, chart)
        return found[defn.id][index]

    def close(self) -> None:
        self._held.clear()
        for spool in self.spools:
            spool.close()


@dataclass
class Streamed:
    """What a build keeps of the record it streamed: the proposals, the shelf of spooled charts, how many
    charts were read, the patients skipped (with the reason) and where they were read."""

    base: str
    proposals: Proposals
    shelf: Shelf
    read: int
    skipped: list[dict[str, str]]
