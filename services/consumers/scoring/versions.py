"""The scorer versions, by label: the only place a version label is turned into rules.

Every version is a module of one shape, `score_turns(scenario, log, state, language, judge) ->
list[TurnScore]`, judging each rubric item by the check its kind registers (checks/registry.py; v3/ and v4/
register their own readings of some kinds over it). A label "N", "N-…" or "N.…" is scored by version N's
rules; a label naming no version is scored by the current one (so `--scorer-version 4-rc1` still works).
Adding a version is a package beside v3/ and v4/ and one line here.
"""

from __future__ import annotations

from collections.abc import Callable

from services.consumers.scoring.v2 import scorer as v2
from services.consumers.scoring.v3 import scorer as v3
from services.consumers.scoring.v4 import scorer as v4

CURRENT = "4"  # SCORER_VERSION: bump when a check's behaviour or a data file changes what passes
ScoreTurns = Callable[..., list]
VERSIONS: dict[str, ScoreTurns] = {"2": v2.score_turns, "3": v3.score_turns, CURRENT: v4.score_turns}


def rules_of(version: str | None) -> str:
    """Which version's rules score a scorer-version label: "2" (and "2-…", "2.…") version 2's, "3" (and
    "3-…", "3.…") v3/'s, anything else the current (v4/)."""
    label = version or CURRENT
    return next((rules for rules in VERSIONS
                 if label == rules or label.startswith((f"{rules}-", f"{rules}."))), CURRENT)


def score_turns_of(version: str | None) -> ScoreTurns:
    """The `score_turns` of the version whose rules score `version`."""
    return VERSIONS[rules_of(version)]
