"""How Inspect finds the task (the `inspect_ai` entry point in pyproject.toml, loaded from installed
metadata), the task's arguments and their errors, and the tools the model is given (Rounds' OpenAI tools)."""

from __future__ import annotations

import importlib.metadata
import json
import tomllib
from pathlib import Path

import pytest

from rounds.inspect.dataset import ScenariosNotFound, load_jobs, selection
from rounds.inspect.tools import schema_of, tool_infos
from services.simulator.assistants.openai_chat import openai_tools

REPO = Path(__file__).resolve().parents[3]


def entry_point() -> tuple[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    [(name, target)] = project["entry-points"]["inspect_ai"].items()
    assert "inspect-ai>=0.3.285" in " ".join(project["optional-dependencies"]["inspect"])
    assert "rounds[inspect]" in project["optional-dependencies"]["test"]
    return name, target


def installed_entry_point(site: Path) -> Path:
    """`site` holding pyproject's entry point as installed metadata (the dist-info `pip install -e .` writes
    for it), to put on a fresh interpreter's path: there `inspect eval rounds/physassist` and `inspect score
    --scorer rounds/rounds_scorer` find Rounds with nothing of it imported first (test_readme_inspect.py,
    test_rescore.py)."""
    name, target = entry_point()
    site.mkdir(parents=True, exist_ok=True)
    installed = importlib.metadata.entry_points(group="inspect_ai")
    if any(ep.name == name and ep.value == target for ep in installed):
        return site  # `pip install -e .` ran: a second distribution with the same entry point hides both
    info = site / "rounds_inspect_entry-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rounds-inspect-entry\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[inspect_ai]\n{name} = {target}\n")
    return site


def test_the_entry_point_names_the_namespace_and_a_module_that_registers_the_task() -> None:
    name, target = entry_point()
    assert name == "rounds"  # `rounds/physassist`: Inspect loads the entry point named by the prefix
    from inspect_ai._util.registry import registry_lookup

    __import__(target)
    assert registry_lookup("task", "rounds/physassist") is not None
    assert registry_lookup("scorer", "rounds/rounds_scorer") is not None


def test_the_model_gets_rounds_openai_tools_with_the_same_names_and_schemas() -> None:
    ours = {info.name: schema_of(info) for info in tool_infos()}
    theirs = {t["function"]["name"]: t["function"]["parameters"] for t in openai_tools()}
    assert set(ours) == set(theirs) >= {"fhir_search", "fhir_read", "fhir_create", "fhir_update",
                                        "ask_patient", "answer"}

    def strip(schema, unknown=("minItems",)):  # keywords Inspect's JSONSchema model does not carry
        if isinstance(schema, dict):
            return {k: strip(v) for k, v in schema.items() if k not in unknown}
        return [strip(v) for v in schema] if isinstance(schema, list) else schema

    for name in theirs:
        assert ours[name] == strip(theirs[name]), name
    descriptions = {info.name: info.description for info in tool_infos()}
    assert descriptions == {t["function"]["name"]: t["function"]["description"] for t in openai_tools()}


def test_the_default_scenarios_are_what_rounds_demo_leaves_and_a_missing_file_says_how_to_build_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenariosNotFound) as missing:
        selection(None, "en", "implicit", None, None)
    said = str(missing.value)
    assert "rounds-demo/scenarios.jsonl" in said and "rounds demo" in said
    assert "rounds scenarios build" in said
    (tmp_path / "rounds-demo").mkdir()
    fixture = REPO / "tests/simulator/fixtures/scenarios.jsonl"
    (tmp_path / "rounds-demo/scenarios.jsonl").write_text(fixture.read_text())
    assert selection(None, "en", "implicit", None, None).scenarios == Path("rounds-demo/scenarios.jsonl")


def _lines(tmp_path: Path) -> Path:
    """The fixture scenario under three ids and two families."""
    line = json.loads((REPO / "tests/simulator/fixtures/scenarios.jsonl").read_text())
    out = tmp_path / "s.jsonl"
    rows = [{**line, "id": f"s{i}", "family": "medication_safety" if i < 2 else "other_family"}
            for i in range(3)]
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return out


def test_language_variant_families_and_limit_choose_the_samples(tmp_path: Path) -> None:
    path = _lines(tmp_path)
    every = load_jobs(selection(path, "both", "explicit", None, None))
    assert sorted(every) == [f"s{i}:{lang}:explicit" for i in range(3) for lang in ("en", "zh")]
    assert all(job.variant == "explicit" for job in every.values())
    some = load_jobs(selection(path, "zh", "implicit", "other_family", None))
    assert list(some) == ["s2:zh:implicit"]
    assert list(load_jobs(selection(path, "en", "implicit", "medication_safety,other_family", 1))) == [
        "s0:en:implicit"]


@pytest.mark.parametrize(("args", "message"), [
    (("fr", "implicit", None, None), "language must be one of en, zh, both"),
    (("en", "casual", None, None), "variant must be one of implicit, explicit"),
    (("en", "implicit", None, 0), "limit must be at least 1"),
])
def test_bad_task_arguments_name_the_argument_and_its_choices(tmp_path: Path, args, message) -> None:
    with pytest.raises(ValueError, match=message):
        selection(_lines(tmp_path), *args)


def test_an_unknown_family_is_an_error_listing_the_file_s_families(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\['nope'\] are not in .* \['medication_safety', 'other_family'\]"):
        load_jobs(selection(_lines(tmp_path), "en", "implicit", "nope", None))


def test_a_bad_scenario_line_is_an_error_naming_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a valid scenario line"):
        load_jobs(selection(bad, "en", "implicit", None, None))
