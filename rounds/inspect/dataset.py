"""A Rounds scenario file as an Inspect dataset: one sample per (scenario, language, variant), i.e. one Rounds
session (Inspect's epochs are Rounds' trials).

The sample carries what the viewer shows (the physician's first words, the reference answers as target) and
what the solver needs to find the job again (the ids in metadata); the scenario line itself stays with the
task, so the log does not repeat every definition (the Rounds log records it on `rounds.session.started`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from inspect_ai.dataset import MemoryDataset, Sample

from contracts.languages import LANGUAGE_CHOICES
from contracts.scenario import Scenario
from services.simulator.orchestrator.jobs import canonical_digest, read_scenarios
from services.simulator.orchestrator.session_loop import SessionJob

DEFAULT_SCENARIOS = Path("rounds-demo/scenarios.jsonl")  # what `rounds demo` leaves in its folder
VARIANTS = ("implicit", "explicit")


@dataclass(frozen=True)
class Selection:
    """The task's arguments that choose the sessions."""

    scenarios: Path
    languages: tuple[str, ...]
    variant: str
    families: frozenset[str] | None
    limit: int | None


class ScenariosNotFound(FileNotFoundError):
    """No scenario file where the task looked: says how to make one."""


def selection(scenarios: str | Path | None, language: str, variant: str, families: str | Sequence[str] | None,
              limit: int | None) -> Selection:
    """Task arguments → a Selection; a bad value is a ValueError naming the argument and its choices."""
    path = Path(scenarios) if scenarios else DEFAULT_SCENARIOS
    if not path.is_file():
        raise ScenariosNotFound(
            f"no Rounds scenario file at {path.resolve()}: run `rounds demo` (it leaves "
            f"{DEFAULT_SCENARIOS}) or `rounds scenarios build --out FILE.jsonl`, then pass -T scenarios=FILE")
    if language not in LANGUAGE_CHOICES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGE_CHOICES)}, got {language!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if limit is not None and int(limit) < 1:
        raise ValueError(f"limit must be at least 1, got {limit!r}")
    chosen = None
    if families:
        names = families.split(",") if isinstance(families, str) else list(families)
        chosen = frozenset(n.strip() for n in names if n.strip()) or None
    count = int(limit) if limit is not None else None
    return Selection(path, LANGUAGE_CHOICES[language], variant, chosen, count)


def sample_id(scenario_id: str, language: str, variant: str) -> str:
    return f"{scenario_id}:{language}:{variant}"


def load_jobs(chosen: Selection) -> dict[str, SessionJob]:
    """Sample id → the session job (trial 0: the solver sets the trial from the epoch)."""
    lines = read_scenarios(chosen.scenarios)
    if chosen.families is not None:
        known = {scenario.family for scenario, _ in lines}
        unknown = sorted(chosen.families - known)
        if unknown:
            raise ValueError(f"families {unknown} are not in {chosen.scenarios} (it has {sorted(known)})")
        lines = [(s, line) for s, line in lines if s.family in chosen.families]
    if chosen.limit is not None:
        lines = lines[:chosen.limit]
    return {
        sample_id(scenario.id, language, chosen.variant):
            SessionJob(scenario, line, canonical_digest(line), 0, language, chosen.variant)
        for scenario, line in lines
        for language in chosen.languages
    }


def _target(scenario: Scenario, language: str) -> list[str]:
    return [getattr(turn.answer, language) for turn in scenario.turns if turn.answer is not None]


def to_samples(jobs: dict[str, SessionJob]) -> Iterable[Sample]:
    for key, job in jobs.items():
        scenario = job.scenario
        first = getattr(scenario.turns[0].text, job.language)
        yield Sample(
            id=key,
            input=getattr(first, job.variant),
            target=_target(scenario, job.language),
            metadata={"scenario": scenario.id, "family": scenario.family, "difficulty": scenario.difficulty,
                      "language": job.language, "variant": job.variant, "patient": scenario.patient,
                      "now": scenario.now.isoformat(), "turns": len(scenario.turns),
                      "scenario_digest": job.digest},
        )


def dataset(jobs: dict[str, SessionJob], name: str) -> MemoryDataset:
    return MemoryDataset(list(to_samples(jobs)), name=name, location=name)
