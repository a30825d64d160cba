"""Which scenario a session is scored against: the definition its session.started carries, or a fresh one
of the same id from a scenario file (`rounds score --scenarios FILE`, τ²-bench's --fresh-tasks)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from contracts.scenario import Scenario
from events.payloads import SessionStarted


class ScenarioFileError(ValueError):
    pass


def load_scenarios(path: str | Path) -> dict[str, Scenario]:
    """Scenario lines (JSONL) by id; a bad line is an error naming file:line."""
    out: dict[str, Scenario] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            scenario = Scenario.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise ScenarioFileError(f"{path}:{number}: {exc}") from None
        out[scenario.id] = scenario
    return out


def scenario_of(started: SessionStarted | None, fresh: dict[str, Scenario] | None = None) -> Scenario | None:
    """The session's scenario: a fresh definition by id when given, else the one in the log, else None."""
    if started is None:
        return None
    scenario_id = started.scenario
    if fresh and scenario_id in fresh:
        return fresh[scenario_id]
    definition = started.scenario_definition
    if definition is None:
        return None
    digest = started.scenario_digest or hashlib.sha256(
        orjson.dumps(definition, option=orjson.OPT_SORT_KEYS)).hexdigest()
    key = (scenario_id, digest)
    if key in _PARSED:
        return _PARSED[key]
    try:
        scenario = Scenario.model_validate(definition)
    except ValidationError:
        return None
    if len(_PARSED) >= 1024:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = scenario
    return scenario


# (scenario id, digest of its line) -> the validated definition: the sessions of a run repeat their scenarios
_PARSED: dict[tuple[Any, str], Scenario] = {}
