"""Building a scenario set from a FHIR record: stream every chart through the REST API, let each family's
definitions propose moments (kept as a few numbers each: proposals.py; the chart goes to a spool on disk),
then try the moments in a seeded order that spreads sessions over patients, reading a chart back only when
one of its moments is tried, assemble the sessions and count what was built, dropped and skipped. Same record
+ seed -> same sessions, whatever the record's size: memory holds the moments, never every chart."""

from __future__ import annotations

import asyncio
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from contracts.languages import LANGUAGES
from contracts.scenario import SCENARIO_FORMAT_VERSION, Scenario
from rounds.shards import ALL, Shard
from services.simulator.scenarios import memory as mem
from services.simulator.scenarios.binding_table import evaluate
from services.simulator.scenarios.bindings import Moment
from services.simulator.scenarios.chart import Chart
from services.simulator.scenarios.engine import BUILDER, Infeasible, assemble, session_rng
from services.simulator.scenarios.families import Definition, families, family_shares, multi_turn
from services.simulator.scenarios.proposals import Candidates, Proposals, Shelf
from services.simulator.scenarios.reader import RecordError, list_patients, read_chart

SINGLE_TURN = "medagentbench"
READ_CONCURRENCY = 4


class BuildError(RuntimeError):
    """The record cannot yield scenarios (unreadable, empty); the message says why."""


@dataclass
class Stats:
    facts_kept: int = 0
    facts_dropped: int = 0
    sources_removed: int = 0
    rejected: Counter = field(default_factory=Counter)  # definition -> moments failing requirements


async def stream_record(
    client: httpx.AsyncClient, take: Callable[[Chart], None], shard: Shard = ALL
) -> tuple[int, list[dict[str, str]]]:
    """Read every patient's chart (of `shard`'s patients only: rounds/shards.py) and hand each to `take` in
    Patient id order, holding no more than READ_CONCURRENCY charts at a time; the number of charts read and
    the patients skipped (with the reason: a failed read, or no lab the vocabulary knows)."""
    try:
        patients = await list_patients(client)
    except RecordError as exc:
        raise BuildError(f"cannot list patients: {exc}") from exc
    if not patients:
        raise BuildError(f"the FHIR server at {client.base_url} holds no Patient resources")
    patients = [p for p in patients if shard.holds(p["id"])]
    if not patients:  # a shard may draw none of a small record's patients
        return 0, []
    medications: dict[str, dict] = {}
    lock = asyncio.Lock()
    skipped: list[dict[str, str]] = []
    read = 0

    async def one(patient: dict) -> Chart | None:
        try:
            return await read_chart(client, patient, medications, lock)
        except RecordError as exc:
            skipped.append({"patient": f"Patient/{patient['id']}", "reason": str(exc)})
            return None

    def hand(chart: Chart | None) -> None:
        nonlocal read
        if chart is None:
            return
        read += 1
        if not any(chart.labs.values()):
            skipped.append({"patient": chart.patient, "reason": "no lab results the vocabulary knows"})
        take(chart)

    window: deque[asyncio.Task] = deque()  # the reads under way, taken in order as the head completes
    try:
        for patient in patients:
            window.append(asyncio.ensure_future(one(patient)))
            if len(window) >= READ_CONCURRENCY:
                hand(await window.popleft())
        while window:
            hand(await window.popleft())
    finally:
        for task in window:
            task.cancel()
    if not read:
        raise BuildError(f"every patient's chart failed to read; first: {skipped[0]['reason']}")
    return read, sorted(skipped, key=lambda s: s["patient"])


def _spread(cands: list[int], chart_of: array, rng) -> list[int]:
    """Shuffle, then take patients in turn, so that sessions spread over patients (`cands` are positions in
    a definition's Candidates, `chart_of` their charts)."""
    rng.shuffle(cands)
    by_patient: dict[int, list[int]] = {}
    for k in cands:
        by_patient.setdefault(chart_of[k], []).append(k)
    queues = list(by_patient.values())
    out: list[int] = []
    depth = 0
    while len(out) < len(cands):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out


def _ordered(defn: Definition, cands: Candidates, seed: int) -> array:
    """The definition's candidates in the seeded order the selection tries them (positions in `cands`)."""
    rng = session_rng(seed, defn.id)
    prefer = defn.anchor.prefer
    if not prefer:
        return array("I", _spread(list(range(len(cands))), cands.chart, rng))
    bound = prefer["below"]
    low = _spread([k for k in range(len(cands)) if cands.below(k, bound)], cands.chart, rng)
    rest = _spread([k for k in range(len(cands)) if not cands.below(k, bound)], cands.chart, rng)
    out, share, i, j = array("I"), prefer["share"], 0, 0
    while i < len(low) or j < len(rest):
        if i < len(low) and (j == len(rest) or i <= share * len(out)):
            out.append(low[i])
            i += 1
        else:
            out.append(rest[j])
            j += 1
    return out


def _session(
    family: str, defn: Definition, m: Moment, seed: int, stats: Stats, seen: set[str]
) -> Scenario | None:
    """The session of a moment (the first arc that can be built, from a seeded start), None when the moment
    fails the definition's requirements, no arc fits or its session was already built."""
    if not evaluate(defn.bindings, defn.require, m):
        stats.rejected[defn.id] += 1
        return None
    rng = session_rng(seed, f"{defn.id}|{m.chart.patient}|{m.now.isoformat()}")
    persona = mem.persona(rng)
    facts, dropped, removed = mem.verify(mem.propose(m.chart, persona.adherence, m.now), m.chart, m.now)
    start = rng.randrange(len(defn.arcs))
    for n in range(len(defn.arcs)):
        arc = defn.arcs[(start + n) % len(defn.arcs)]
        try:
            scenario = assemble(family, defn, m, arc, facts, persona, seed)
        except Infeasible:
            continue
        if scenario.id in seen:
            return None
        seen.add(scenario.id)
        stats.facts_kept += len(facts)
        stats.facts_dropped += dropped
        stats.sources_removed += removed
        return scenario
    return None


def sessions_of(
    family: str, defn: Definition, proposals: Proposals, shelf: Shelf, seed: int, stats: Stats
) -> Iterator[Scenario]:
    """The definition's sessions, best spread first, lazily (the builder takes as many as it needs); each
    candidate's chart comes back from the shelf only when its moment is tried, and a paused stream holds no
    moment (so no chart) of its own."""
    seen: set[str] = set()
    cands = proposals.of[defn.id]
    for k in _ordered(defn, cands, seed):
        m = shelf.moment(defn, cands.chart[k], cands.index[k])
        scenario = _session(family, defn, m, seed, stats, seen)
        del m
        if scenario is not None:
            yield scenario


def split(total: int, weights: list[float]) -> list[int]:
    """Integer shares of `total` proportional to weights (largest remainders; ties to the first)."""
    raw = [total * w / sum(weights) for w in weights]
    shares = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: (shares[i] - raw[i], i))[: total - sum(shares)]:
        shares[i] += 1
    return shares


def check_families(names: list[str] | None) -> list[str]:
    """The families to build (all by default); BuildError naming the unknown ones."""
    known = families()
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise BuildError(f"unknown families {unknown}; known: {sorted(known)}")
    return list(names or known)


def definitions_of(names: list[str] | None) -> list[Definition]:
    """The definitions a build of these families tries (what the record's charts are proposed to)."""
    known = families()
    return [defn for family in check_families(names) for defn in known[family].definitions]


def select(
    proposals: Proposals, shelf: Shelf, seed: int, sessions: int, names: list[str] | None, per_category: int
) -> tuple[list[Scenario], Stats, dict[str, int]]:
    """The sessions: `sessions` multi-turn ones shared by the multi-turn families as the rules' shares say
    (families.py `family_shares`; a definition's shortfall goes to the others), plus `per_category`
    single-turn tasks per MedAgentBench category."""
    known = families()
    chosen = check_families(names)
    stats = Stats()
    out: list[Scenario] = []
    shortfall: dict[str, int] = {}
    multi = [f for f in chosen if multi_turn(known[f])]
    streams: list[tuple[str, Iterator[Scenario]]] = []
    owed = 0
    shares = family_shares()
    quotas = split(sessions, [shares[f] for f in multi]) if multi else []
    for family, quota in zip(multi, quotas, strict=True):
        defs = known[family].definitions
        for defn, share in zip(defs, split(quota, [d.weight for d in defs]), strict=True):
            stream = sessions_of(family, defn, proposals, shelf, seed, stats)
            got = [s for _, s in zip(range(share), stream, strict=False)]
            out.extend(got)
            owed += share - len(got)
            streams.append((family, stream))
    while owed and streams:  # round-robin the shortfall over definitions with moments left
        for family, stream in list(streams):
            if not owed:
                break
            extra = next(stream, None)
            if extra is None:
                streams.remove((family, stream))
                continue
            out.append(extra)
            owed -= 1
    if owed:
        shortfall["multi_turn"] = owed
    if SINGLE_TURN in chosen:
        for defn in known[SINGLE_TURN].definitions:
            got = list(
                zip(range(per_category), sessions_of(SINGLE_TURN, defn, proposals, shelf, seed, stats),
                strict=False)
            )
            out.extend(s for _, s in got)
            if len(got) < per_category:
                shortfall[defn.id] = per_category - len(got)
    return out, stats, shortfall


def summarize(
    scenarios: list[Scenario],
    stats: Stats,
    shortfall: dict,
    read: int,
    skipped: list,
    seed: int,
    base: str,
) -> dict[str, Any]:
    turns = [t for s in scenarios for t in s.turns]
    count = lambda values: dict(sorted(Counter(values).items()))  # noqa: E731
    return {
        "version": SCENARIO_FORMAT_VERSION,
        "builder": BUILDER,
        "seed": seed,
        "fhir_base": base,
        "patients": {
            "read": read,
            "skipped": skipped,
            "in_sessions": len({s.patient for s in scenarios}),
        },
        "sessions": len(scenarios),
        "turns": len(turns),
        "by_family": count(s.family for s in scenarios),
        "by_definition": count(s.source["definition"] for s in scenarios),
        "by_difficulty": count(s.difficulty for s in scenarios),
        "by_turn_count": count(str(len(s.turns)) for s in scenarios),
        "by_task_type": count(t.task_type for t in turns),
        "by_tool_source": count(t.tool_source for t in turns),
        "by_subtype": count(t.subtype or "none" for t in turns),
        "by_language": {lang: len(turns) for lang in LANGUAGES},
        "by_variant": {v: len(turns) for v in ("explicit", "implicit")},
        "by_persona_completeness": count(s.persona.completeness for s in scenarios),
        "writes": {
            "expected": sum(len(t.writes) for t in turns),
            "forbidden_turns": sum(t.forbid_writes for t in turns),
        },
        "memory": {
            "facts_kept": stats.facts_kept,
            "facts_dropped": stats.facts_dropped,
            "sources_removed": stats.sources_removed,
        },
        "moments_rejected": dict(sorted(stats.rejected.items())),
        "shortfall": shortfall,
    }
