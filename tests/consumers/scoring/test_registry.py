"""The registry finds each rubric kind's check by discovery (one module per kind in checks/kinds/), so a new
kind is its contract entry and one file; any mismatch between a check module and contracts/rubric.py is an
error when the registry loads, never a kind judged by the wrong check or dropped in silence."""

from __future__ import annotations

import pkgutil
import textwrap
from pathlib import Path

import pytest

from contracts.rubric import RUBRIC_KINDS, Kind, NoParams
from services.consumers.scoring.checks import kinds
from services.consumers.scoring.checks.registry import CHECKS, JUDGED_ELSEWHERE, discover

CHECK = '''
from contracts.rubric import {params}
from services.consumers.scoring.check_inputs import CheckResult
from services.consumers.scoring.checks.base import RubricCheck


class {name}(RubricCheck):
    kind = "{kind}"
    params = {params}

    def __call__(self, item, ctx):
        return CheckResult(True, "{kind} judged")
'''


def _package(root: Path, name: str, modules: dict[str, str]) -> str:
    """A throwaway kinds package under `root` (on sys.path) holding `modules` (file stem -> source)."""
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for stem, source in modules.items():
        (folder / f"{stem}.py").write_text(textwrap.dedent(source))
    return name


def _check(kind: str, name: str = "Brief", params: str = "NoParams") -> str:
    return CHECK.format(kind=kind, name=name, params=params)


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_every_kind_module_is_one_check_named_by_its_kind() -> None:
    modules = {info.name for info in pkgutil.iter_modules(kinds.__path__)}
    judged_here = {k for k, spec in RUBRIC_KINDS.items() if spec.check not in JUDGED_ELSEWHERE}
    assert modules == set(CHECKS) == judged_here
    for kind, check in CHECKS.items():
        assert type(check).__module__ == f"{kinds.__name__}.{kind}"
        assert (type(check).__name__, type(check).params) == (RUBRIC_KINDS[kind].check,
                                                              RUBRIC_KINDS[kind].params)


def test_a_new_kind_is_its_contract_entry_and_one_module(on_path: Path) -> None:
    contract = {"answer_brief": Kind(NoParams, False, "Brief", "the answer is brief")}
    package = _package(on_path, "kinds_new", {"answer_brief": _check("answer_brief")})
    found = discover(package, contract)
    assert list(found) == ["answer_brief"] and type(found["answer_brief"]).__name__ == "Brief"
    assert found["answer_brief"](None, None).evidence == "answer_brief judged"  # type: ignore[arg-type]


def test_a_contract_kind_without_a_check_module_fails_to_load(on_path: Path) -> None:
    contract = {"answer_brief": Kind(NoParams, False, "Brief", "brief"),
                "llm_judge": Kind(NoParams, False, "LlmJudge", "judged elsewhere"),
                "orphan": Kind(NoParams, True, "Orphan", "no module")}
    package = _package(on_path, "kinds_orphan", {"answer_brief": _check("answer_brief")})
    with pytest.raises(ImportError, match="no scorer registers: orphan$"):
        discover(package, contract)


@pytest.mark.parametrize(("stem", "source", "error"), [
    ("answer_brief", _check("answer_breif"), "must define one RubricCheck declaring kind = 'answer_brief'"),
    ("answer_brief", "X = 1\n", "must define one RubricCheck"),
    ("answer_brief", _check("answer_brief") + _check("answer_brief", "Again"), "found .*Again.*Brief"),
    ("made_up", _check("made_up"), "kind 'made_up' is not in contracts/rubric.py"),
    ("answer_brief", _check("answer_brief", "Short"), "Short .*does not match the contract's Brief"),
    ("answer_brief", _check("answer_brief", params="TermsParams"), "TermsParams.*does not match.*NoParams"),
], ids=["misspelt_kind", "no_check", "two_checks", "kind_not_in_contract", "other_class", "other_params"])
def test_a_check_module_that_disagrees_with_the_contract_fails_to_load(
        on_path: Path, request: pytest.FixtureRequest, stem: str, source: str, error: str) -> None:
    contract = {"answer_brief": Kind(NoParams, False, "Brief", "brief")}
    package = _package(on_path, f"kinds_bad_{request.node.callspec.id}", {stem: source})
    with pytest.raises(ImportError, match=error):
        discover(package, contract)
