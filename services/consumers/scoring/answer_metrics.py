"""A question-answering suite's figures (FHIR-AgentBench) from the scored checks: answer correctness,
retrieval recall and retrieval precision, overall and by the paper's breakdowns (main table, gold resource
type, question template), each with its 95 % interval clustered by scenario (services/consumers/statistics).

The figures are the means of the checks' measured values (checks/kinds/answer_correct.py, retrieval_*.py)
over the scored sessions' turns that carry them; a run without such checks gets none. Scored with `--judge`,
the peer's own metric (an LLM judging the answer against the gold, the suite's `llm_judge` item) is
`judge_correctness` beside the deterministic `answer_correctness`. They go into the report's `metrics`
(`answer_correctness`, `retrieval_recall`, `retrieval_precision`, their intervals in `metrics.ci95`) and
the breakdowns into `answers.by`. By resource type, recall is whether every gold resource OF THAT TYPE was
retrieved, over the questions whose gold holds the type.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from contracts.score import RunReport, SessionScore
from services.consumers.statistics.clustered import METHOD, clustered
from services.consumers.statistics.intervals import scored

FIGURES = {"answer_correct": "answer_correctness", "retrieval_recall": "retrieval_recall",
           "retrieval_precision": "retrieval_precision", "llm_judge": "judge_correctness"}
DIMENSIONS = ("main_table", "resource_type", "template")


def _units(sessions: list[SessionScore]) -> list[dict[str, Any]]:
    """One unit per turn carrying the checks: its scenario, each figure's value, its group labels."""
    out = []
    for s in sessions:
        for t in s.turns:
            unit: dict[str, Any] = {"scenario": s.scenario, "values": {}, "groups": {}, "by_type": {}}
            judged = [c.passed for c in t.checks if c.kind == "llm_judge"]  # the peer's metric (`--judge`)
            for c in t.checks:
                if c.kind in FIGURES and c.measures and c.measures.get("value") is not None:
                    unit["values"][FIGURES[c.kind]] = float(c.measures["value"])
                    unit["groups"].update(c.measures.get("groups") or {})
                    unit["by_type"].update(c.measures.get("by_type") or {})
            if unit["values"]:
                if judged:
                    unit["values"]["judge_correctness"] = float(judged[0])
                out.append(unit)
    return out


def _figures(units: list[dict[str, Any]], recall_of: str | None = None) -> dict[str, Any]:
    """Each figure's mean and interval over `units`; `recall_of`: recall of that resource type only."""
    scenarios = {s: i for i, s in enumerate(dict.fromkeys(u["scenario"] for u in units))}
    out: dict[str, Any] = {"questions": len(units), "ci95": {}}
    for name in FIGURES.values():
        pairs = [(_value(u, name, recall_of), scenarios[u["scenario"]]) for u in units]
        pairs = [(v, c) for v, c in pairs if v is not None]
        if not pairs:
            continue
        values = np.array([v for v, _ in pairs])
        out[name] = round(float(values.mean()), 6)
        found = clustered(values, np.ones(values.size), np.array([c for _, c in pairs], dtype=np.int64))
        if found is not None and not np.isnan(found.lo):
            out["ci95"][name] = [round(found.lo, 6), round(found.hi, 6)]
    return out


def _value(unit: dict[str, Any], name: str, recall_of: str | None) -> float | None:
    if recall_of is not None and name == "retrieval_recall":
        hit, total = unit["by_type"].get(recall_of, (0, 0))
        return float(hit == total) if total else None
    return unit["values"].get(name)


def with_answer_metrics(report: RunReport) -> RunReport:
    """The report with the suite's figures, when its checks carry them (else unchanged)."""
    units = _units(scored(report))
    if not units:
        return report
    overall = _figures(units)
    metrics = report.metrics.model_copy(update={name: overall[name] for name in FIGURES.values()
                                                if name in overall})
    if metrics.ci95 is not None:
        metrics.ci95 = metrics.ci95.model_copy(update=overall["ci95"])
    by: dict[str, dict[str, Any]] = {}
    for dimension in DIMENSIONS:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for u in units:
            keys = list(u["by_type"]) if dimension == "resource_type" else [u["groups"].get(dimension)]
            for key in keys:
                if key is not None:
                    groups[key].append(u)
        by[dimension] = {key: _figures(group, key if dimension == "resource_type" else None)
                         for key, group in sorted(groups.items())}
    answers = {"questions": len(units), "method": METHOD, "by": by}
    return report.model_copy(update={"metrics": metrics, "answers": answers})
