"""RubricKind -> the check that judges it, found by discovery: every module of `checks/kinds/` is imported
and its RubricCheck declares the kind it judges (the module is named by that kind). The llm_judge kind is
judged by judge.py's LlmJudge, precision by v3/precision.py's Precision: JUDGED_ELSEWHERE.

A kind of contracts/rubric.py whose check is neither found nor judged elsewhere is an error when this module
loads, as is a check module that declares no kind, another file name's kind, a kind the contract lacks, or
another class name or parameter model than the contract's; asking for a kind with no check raises
UnknownKind: a rubric item is never dropped silently."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from contracts.rubric import RUBRIC_KINDS, Kind
from services.consumers.scoring.checks import kinds
from services.consumers.scoring.checks.base import RubricCheck

JUDGED_ELSEWHERE = frozenset({"LlmJudge", "Precision"})  # the judge; each version's turn rule


def discover(package: str, contract: dict[str, Kind]) -> dict[str, RubricCheck]:
    """kind -> an instance of the one check its module in `package` defines; ImportError on any mismatch
    with `contract` (a check the scorer would call under a name or model the scenarios do not use)."""
    found: dict[str, RubricCheck] = {}
    root = importlib.import_module(package)
    for info in pkgutil.iter_modules(root.__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if issubclass(c, RubricCheck) and c.__module__ == module.__name__ and "kind" in vars(c)]
        if len(classes) != 1 or classes[0].kind != info.name:
            raise ImportError(f"{module.__name__} must define one RubricCheck declaring "
                              f"kind = {info.name!r}, found {[(c.__name__, c.kind) for c in classes]}")
        check = classes[0]
        spec = contract.get(check.kind)
        if spec is None:
            raise ImportError(f"{module.__name__}: kind {check.kind!r} is not in contracts/rubric.py")
        if (check.__name__, getattr(check, "params", None)) != (spec.check, spec.params):
            raise ImportError(f"{module.__name__}: {check.__name__} with {getattr(check, 'params', None)} "
                              f"does not match the contract's {spec.check} with {spec.params.__name__}")
        found[check.kind] = check()
    unmatched = [kind for kind, spec in contract.items()
                 if kind not in found and spec.check not in JUDGED_ELSEWHERE]
    if unmatched:
        raise ImportError(f"rubric kinds whose check no scorer registers: {', '.join(unmatched)}")
    return found


CHECKS: dict[str, RubricCheck] = discover(kinds.__name__, RUBRIC_KINDS)


class UnknownKind(KeyError):
    """A rubric kind no check judges (not in contracts/rubric.py, or judged elsewhere and asked for here)."""


def check_of(kind: str) -> RubricCheck:
    """The check registered for `kind`; UnknownKind when none is."""
    check = CHECKS.get(kind)
    if check is None:
        raise UnknownKind(f"no check for rubric kind {kind!r}")
    return check
