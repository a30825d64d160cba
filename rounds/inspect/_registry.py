"""Inspect's entry point into Rounds (`[project.entry-points.inspect_ai] rounds = ...`): importing it
registers `rounds/physassist`, its solver, scorer, epochs reducer and the task-end hook.

Inspect namespaces an object by the installed package it finds for the object's module, and finds none when
the checkout itself is on `sys.path` (a test run or `PYTHONPATH` at the repository root): there the build's
`rounds.egg-info`, which has no editable-install record, shadows the installed distribution, and the task
would be registered as bare `physassist`, which `inspect eval rounds/physassist` and `inspect score --scorer
rounds/rounds_scorer` cannot find. So every object is made sure to carry its `rounds/` name either way.
"""

from inspect_ai._util.registry import RegistryInfo, registry_add, registry_lookup

from rounds.inspect.hooks import RoundsRunEnd
from rounds.inspect.scorer import rounds_scorer, rounds_trials
from rounds.inspect.solver import rounds_session
from rounds.inspect.task import physassist

NAMESPACE = "rounds"
REGISTERED = (("task", "physassist"), ("solver", "rounds_session"), ("scorer", "rounds_scorer"),
              ("score_reducer", "rounds_trials"), ("hooks", "rounds_run_end"), ("metric", "avg"),
              ("metric", "pass_at_turn"), ("metric", "pass_at_session"))

for _type, _name in REGISTERED:
    _bare = registry_lookup(_type, _name)
    if _bare is not None and registry_lookup(_type, f"{NAMESPACE}/{_name}") is None:
        registry_add(_bare, RegistryInfo(type=_type, name=f"{NAMESPACE}/{_name}",
                                         metadata=_bare.__registry_info__.metadata))

__all__ = ["RoundsRunEnd", "physassist", "rounds_scorer", "rounds_session", "rounds_trials"]
