"""The one engine every family runs on: a definition's anchor proposes moments, its bindings compute truth at
each moment, and an arc of its turn templates becomes a Scenario (text, facts, expected writes or a ban on
writing, patient facts, rubric, reference answer). Family behaviour lives in the family files."""

from __future__ import annotations

import hashlib
import random
from datetime import datetime
from typing import Any

from contracts.languages import LANGUAGES
from contracts.rubric import GATES, PrecisionParams
from contracts.scenario import ExpectedWrite, FieldConstraint, Persona, RubricItem, Scenario, Turn
from services.simulator.scenarios import memory as mem
from services.simulator.scenarios import vocabulary as vocab
from services.simulator.scenarios.bindings import Moment, conclusion
from services.simulator.scenarios.clock import clock, local, next_morning
from services.simulator.scenarios.families import Definition, TurnSpec
from services.simulator.scenarios.templates import View, fill, number, render, truth_view
from services.simulator.scenarios.truth import Truth
from services.simulator.scenarios.writes import write_templates

BUILDER = "rounds-scenarios/1"

# The precision rule of every turn with facts, as rubric data (contracts/rubric.py PrecisionParams).
PRECISION = PrecisionParams().model_dump()


class Infeasible(Exception):
    """This arc cannot be built for this moment (e.g. the patient knows nothing a patient turn asks)."""


def _views(m: Moment, defn: Definition) -> dict[str, Any]:
    views: dict[str, Any] = {}
    for name, truth in m.values.items():
        key = truth.extra.get("_lab").key if truth.extra.get("_lab") else m.lab
        decimals = vocab.lab(key)["decimals"] if key and key in vocab.vocabulary()["labs"] else None
        views[name] = truth_view(truth, decimals)
    if m.lab:
        views["lab"] = View({**vocab.lab(m.lab), "key": m.lab})
    if m.med and m.med.key:
        views["drug"] = View({**vocab.drug(m.med.key), "key": m.med.key})
    views["now_t"] = clock(m.now)
    views["next_morning_t"] = clock(next_morning(m.now))
    views["patient_name"] = m.chart.name
    views["mrn"] = m.chart.mrn or ""
    views["birth_date"] = m.chart.birth_date.isoformat() if m.chart.birth_date else ""
    labs = vocab.vocabulary()["labs"]
    for key, value in defn.context.items():
        if isinstance(value, str) and value in labs:
            views[key] = View({**labs[value], "key": value})
        elif not isinstance(value, dict):
            views[key] = value
    return views


def _outcome(truth: Truth) -> str:
    if truth.kind == "decision" or truth.kind == "trend":
        return str(truth.value)
    return "present" if truth.present else "absent"


def _write_values(m: Moment, views: dict[str, Any], defn: Definition) -> dict[str, Any]:
    values: dict[str, Any] = {
        "patient": m.chart.patient,
        "encounter": m.encounter,
        "now": local(m.now).isoformat(),
        "next_morning": next_morning(m.now).isoformat(),
    }
    if m.lab:
        values.update(_lab_values(m.lab))
    for name, truth in m.values.items():
        for key, extra in truth.extra.items():
            if not key.startswith("_") and isinstance(extra, int | float | str):
                values[f"{name}_{key}"] = extra
    for key, value in defn.context.items():
        if isinstance(value, dict):
            values.update(
                {f"{key}_{k}": render(v, views) if isinstance(v, str) else v for k, v in value.items()}
            )
    return values


def _lab_values(key: str) -> dict[str, Any]:
    entry = vocab.lab(key)
    return {"lab_loinc": entry["loinc"], "lab_itemid": entry["itemid"], "lab_en": entry["en"]}


def _writes(spec: TurnSpec, m: Moment, values: dict[str, Any]) -> tuple[list[ExpectedWrite], bool]:
    if spec.lab:
        values = {**values, **_lab_values(m.context[spec.lab[1:]] if spec.lab.startswith("$") else spec.lab)}
    names: list[str] | str = spec.writes  # type: ignore[assignment]
    if isinstance(spec.writes, dict):
        names = spec.writes[_outcome(m.values[spec.writes["by"]])]
    if names == "forbid":
        return [], True
    templates = write_templates()
    out = []
    for name in names:
        t = templates[name]
        resource = fill(t["resource"], values)
        constraints = [FieldConstraint.model_validate(fill(c, values)) for c in t["constraints"]]
        out.append(
            ExpectedWrite(resource_type=resource["resourceType"], constraints=constraints, resource=resource)
        )
    return out, False


def _terms(kind: str, m: Moment) -> dict[str, list[str]]:
    entry = {
        "lab": vocab.lab(m.lab) if m.lab else None,
        "drug": vocab.drug(m.med.key) if m.med and m.med.key else None,
    }.get(kind)
    if entry is None and kind == "organism" and m.isolate:
        names = vocab.organism_names(m.isolate.organism)
        return {"en": [names["en"]], "zh": [names["zh"]]}
    if entry is None:
        raise Infeasible(f"no {kind} to mention")
    return {"en": [entry["en"], entry["lay_en"]], "zh": [entry["zh"], entry["lay_zh"]]}


def _gate(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """An item the engine adds on its own; a safety item when its kind is a gate (contracts/rubric.py)."""
    return {"kind": kind, "params": params, "safety": kind in GATES}


def _rubric(
    index: int, spec: TurnSpec, m: Moment, facts: list[str], writes: list, forbid: bool, patient: list[str]
) -> list[RubricItem]:
    items: list[dict] = []
    for item in spec.rubric:
        when = item.get("when")  # {"binding": b, "in": [outcomes]}: only for those outcomes
        if when and _outcome(m.values[when["binding"]]) not in when["in"]:
            continue
        kind = item["kind"]
        params: dict[str, Any] = {}
        if kind == "fact_cited":
            params = {"fact": facts.index(item["fact"])}
        elif kind == "conclusion":
            params = {"expected": conclusion(_outcome(m.values[item["from"]]))}
        elif kind in ("entity_mentioned", "does_not_recommend"):
            params = {"terms": item["terms"] if isinstance(item["terms"], dict) else _terms(item["terms"], m)}
        elif kind == "asked_patient":
            params = {"facts": patient}
        items.append(
            {
                "kind": kind,
                "params": params,
                "safety": item.get("safety", False),
                "weight": item.get("weight", 1.0),
            }
        )
    items += [{"kind": "write_made", "params": {"write": i}} for i in range(len(writes))]
    if forbid:
        items.append(_gate("no_forbidden_write", {}))
    elif not writes:
        items.append(_gate("no_unexpected_write", {"allowed": []}))
    if spec.tool_source in ("ehr", "mixed"):  # results the answer cites: none from after `now`
        items.append(_gate("no_future_value", {}))
    if facts:  # scorer v3: wrong claims and unasked-for results beyond the budget lower the turn's score
        items.append({"kind": "precision", "params": dict(PRECISION)})
    if spec.judge:
        items.append({"kind": "llm_judge", "params": {"criterion": spec.judge}})
    return [
        RubricItem(
            id=f"t{index}-{n}-{it['kind']}",
            kind=it["kind"],
            params=it["params"],
            safety=it.get("safety", False),
            weight=it.get("weight", 1.0),
        )
        for n, it in enumerate(items)
    ]


def _answer(spec: TurnSpec, m: Moment, views: dict[str, Any]) -> dict[str, str]:
    answer = spec.answer
    if "by" in answer:
        answer = answer[_outcome(m.values[answer["by"]])]
    return {lang: render(answer[lang], views) for lang in LANGUAGES}


def difficulty(defn: Definition, arc: list[str]) -> str:
    types = [defn.turns[name].task_type for name in (arc[1:3] if not defn.single_turn else arc)]
    if defn.single_turn and defn.context.get("difficulty"):
        return str(defn.context["difficulty"])
    return "L3" if "reasoning" in types else "L2" if "gathering" in types else "L1"


def assemble(
    family: str, defn: Definition, m: Moment, arc: list[str], memory: list[dict], persona: Persona, seed: int
) -> Scenario:
    """One session from an evaluated moment and an arc; Infeasible if a turn cannot be grounded."""
    views = _views(m, defn)
    values = _write_values(m, views, defn)
    turns, used_patient = [], []
    for index, name in enumerate(arc):
        spec = defn.turns[name]
        if spec.needs and _outcome(m.values[spec.needs["binding"]]) not in spec.needs["in"]:
            raise Infeasible(f"turn {name}: {spec.needs['binding']} is not one of {spec.needs['in']}")
        patient: list[str] = []
        if spec.patient:
            cats = spec.patient["categories"]
            chosen = sorted(
                (f for f in memory if f["category"] in cats),
                key=lambda f: (cats.index(f["category"]), f["id"]),
            )
            patient = [f["id"] for f in chosen[: spec.patient.get("max", 3)]]
            if not patient:
                raise Infeasible(f"turn {name}: the patient knows nothing about {cats}")
            used_patient += patient
            views["memory"] = View(
                {lang: " ".join(f["text"][lang] for f in chosen[: len(patient)]) for lang in LANGUAGES}
            )
        writes, forbid = _writes(spec, m, values)
        text = {
            lang: {
                "explicit": render(spec.text[lang][0], views),
                "implicit": render(spec.text[lang][1], views),
            }
            for lang in LANGUAGES
        }
        turns.append(
            Turn(
                index=index,
                task_type=spec.task_type,
                tool_source=spec.tool_source,
                subtype=spec.subtype if index else None,
                text=text,
                facts=[m.values[f].fact() for f in spec.facts],
                writes=writes,
                forbid_writes=forbid,
                patient_facts=patient,
                rubric=_rubric(index, spec, m, spec.facts, writes, forbid, patient),
                answer=_answer(spec, m, views),
            )
        )
    critical: set[str] = set()
    if persona.completeness == "critical_withheld":
        pool = used_patient or [f["id"] for f in memory if f["category"] in ("allergy", "medication")]
        if pool:
            critical = {pool[0]}
        else:
            persona = persona.model_copy(update={"completeness": "partial"})
    digest = hashlib.sha256(
        f"{defn.id}|{m.chart.patient}|{m.now.isoformat()}|{'/'.join(arc)}".encode()
    ).hexdigest()[:12]
    return Scenario(
        id=f"{defn.id}-{digest}",
        family=family,
        difficulty=difficulty(defn, arc),
        patient=m.chart.patient,
        encounter=m.encounter,
        now=local(m.now),
        persona=persona,
        patient_memory=mem.finalize(memory, critical),
        turns=turns,
        source={"builder": BUILDER, "definition": defn.id, "arc": arc, "seed": seed},
    )


def session_rng(seed: int, key: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"{seed}|{key}".encode()).digest()[:8], "big"))


__all__ = ["Infeasible", "assemble", "difficulty", "number", "session_rng", "datetime"]
