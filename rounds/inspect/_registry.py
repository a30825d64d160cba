"""Inspect's entry point into Rounds (`[project.entry-points.inspect_ai] rounds = ...`): importing it
registers `rounds/physassist`, its solver and scorer, and the task-end hook."""

from rounds.inspect.hooks import RoundsRunEnd
from rounds.inspect.scorer import rounds_scorer
from rounds.inspect.solver import rounds_session
from rounds.inspect.task import physassist

__all__ = ["RoundsRunEnd", "physassist", "rounds_scorer", "rounds_session"]
