"""The family file format (data/families/*.json), validated on load: a family is data the engine interprets,
never code. Each file holds one family and one or more definitions (sub-scenarios sharing the family label,
e.g. medication safety's renal / duplicate / allergy checks).

A definition declares its anchor (which moments of which patients qualify and where the clock stops), its
bindings (truth computed at `now`, by kind), the requirements a candidate must meet, its turn templates
(EN+ZH,
explicit+implicit, facts, expected writes, rubric, reference answer) and its arcs (sequences of turn names;
the difficulty follows from the arc)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.languages import LANGUAGES, Language
from contracts.scenario import TaskType, ToolSource

FAMILY_DIR = Path(__file__).parent / "data" / "families"
RULES = FAMILY_DIR.parent / "rules.json"


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Anchor(Spec):
    type: Literal["lab", "med", "isolate", "discharge", "patient"]
    labs: list[str] = Field(default_factory=list)
    drugs: list[str] = Field(default_factory=list)  # vocabulary drug keys (med anchors)
    drug_classes: list[str] = Field(default_factory=list)
    offset_minutes: int | list[int] = 0  # a list: candidates cycle through the offsets
    in_encounter: bool = False
    prefer: dict[str, float] | None = None  # {"below": x, "share": 0.5}: that share of picks has value < x
    min_stay_hours: float = 0
    require_active: bool = True  # med anchors: the order is still running at `now`


class Binding(Spec):
    name: str
    kind: Literal[
        "latest",
        "previous",
        "value_at",
        "mean",
        "min",
        "max",
        "count",
        "trend",
        "exists",
        "decision",
        "egfr",
        "age",
        "anchor_med",
        "class_duplicates",
        "allergy",
        "isolate",
        "susceptible",
        "resistant",
        "demographics",
        "constant",
        "change",
        "range",
        "active_meds",
        "coverage",
        "vital_bp",
        "referral",
        "contraindication",
        "administration",
    ]
    lab: str | None = None  # default: the anchor's lab; "$name": the lab named by context[name]
    hours: float | None = None
    days: float | None = None
    of: str | None = None  # another binding (previous: strictly before it; value_at: at its time)
    rule: str | None = None
    input: str | None = None
    value: Any = None


class Require(Spec):
    name: str
    op: Literal["present", "absent", ">=", "<=", ">", "<", "==", "!=", "in"]
    value: Any = None
    field: str = "value"


Bilingual = dict[Language, list[str]]


class TurnSpec(Spec):
    task_type: TaskType
    tool_source: ToolSource
    subtype: Literal["NA", "PE", "AE"] | None = None
    text: Bilingual  # per language: [explicit, implicit]
    facts: list[str] = Field(default_factory=list)
    writes: list[str] | dict[str, Any] = Field(default_factory=list)
    patient: dict[str, Any] | None = None  # {"categories": [...], "max": n}
    rubric: list[dict[str, Any]] = Field(default_factory=list)
    answer: dict[str, Any]
    judge: dict[str, str] | None = None  # optional LLM-judge criterion {en, zh}
    lab: str | None = None  # the lab this turn's writes order, when not the anchor's ("$name": from context)
    needs: dict[str, Any] | None = None  # {"binding": b, "in": [outcomes]}: the arc is infeasible otherwise

    @model_validator(mode="after")
    def _two_phrasings(self) -> TurnSpec:
        for lang in LANGUAGES:
            if len(self.text.get(lang, [])) != 2:
                raise ValueError(f"text.{lang} must be [explicit, implicit]")
        return self


class Definition(Spec):
    id: str
    weight: float = 1.0
    single_turn: bool = False
    anchor: Anchor
    bindings: list[Binding]
    require: list[Require] = Field(default_factory=list)
    turns: dict[str, TurnSpec]
    arcs: list[list[str]]
    context: dict[str, Any] = Field(default_factory=dict)  # constants the templates may use

    @model_validator(mode="after")
    def _arcs_resolve(self) -> Definition:
        names = {b.name for b in self.bindings}
        for arc in self.arcs:
            unknown = set(arc) - set(self.turns)
            if unknown:
                raise ValueError(f"{self.id}: arc names unknown turns {sorted(unknown)}")
            if not self.single_turn and (len(arc) != 4 or self.turns[arc[0]].task_type != "lookup"):
                raise ValueError(f"{self.id}: an arc is four turns starting with a lookup")
            late = [name for name in arc[1:] if self.turns[name].subtype is None]
            if late:
                raise ValueError(f"{self.id}: turns after the first name their anaphora (subtype): {late}")
        used = {name for arc in self.arcs for name in arc}
        for name, turn in self.turns.items():
            if name not in used:
                continue
            missing = set(turn.facts) - names
            if missing:
                raise ValueError(f"{self.id}.{name}: facts name unknown bindings {sorted(missing)}")
        return self


class Family(Spec):
    family: str
    doc: str = Field(default="", alias="_doc")
    # its tasks search across patients (MedAgentBench's lookups by name and birth date): its sessions are
    # not confined to the scenario's patient; every other family's are, as a SMART launch is
    cross_patient_search: bool = False
    definitions: list[Definition] = Field(min_length=1)


def load_family(path: Path) -> Family:
    """A family file; top-level `turns`, `arcs` and `context` are shared by its definitions (a definition's
    own entries win)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    shared = {key: raw.pop(key) for key in ("turns", "arcs", "context") if key in raw}
    for definition in raw.get("definitions", ()):
        for key, value in shared.items():
            if key == "arcs":
                definition.setdefault(key, value)
            else:
                definition[key] = {**value, **definition.get(key, {})}
    return Family.model_validate(raw)


def confined(family: str) -> bool:
    """Whether a session of `family` is bound to its scenario's patient (every family but those whose rules
    say `cross_patient_search`; a family this build does not know is confined too)."""
    known = families().get(family)
    return known is None or not known.cross_patient_search


@cache
def families() -> dict[str, Family]:
    """Every family file, by family name (file order is name order)."""
    found = [load_family(path) for path in sorted(FAMILY_DIR.glob("*.json"))]
    return {f.family: f for f in found}


def multi_turn(family: Family) -> bool:
    """A family of multi-turn sessions (the others' definitions are single-turn tasks, built per category)."""
    return not all(d.single_turn for d in family.definitions)


def shares_of(table: dict[str, float], known: dict[str, Family]) -> dict[str, float]:
    """The multi-turn families' shares of a build's sessions as the rules give them, checked: every
    multi-turn family has one, each names a known family, and they sum to 1 — so a family added without its
    share, or with one no other family gave up, is an error instead of a smaller count for every family."""
    shares = {name: float(share) for name, share in table.items() if not name.startswith("_")}
    multi = {name for name, family in known.items() if multi_turn(family)}
    if set(shares) != multi:
        raise ValueError("rules.json family_shares must name exactly the multi-turn families: without a "
                         f"share {sorted(multi - set(shares))}, not one {sorted(set(shares) - multi)}")
    if abs(sum(shares.values()) - 1) > 1e-9 or min(shares.values(), default=1) <= 0:
        raise ValueError(f"rules.json family_shares must be positive and sum to 1, not "
                         f"{sum(shares.values())}: lower others' shares explicitly to make room for one")
    return shares


@cache
def family_shares() -> dict[str, float]:
    """data/rules.json `family_shares`, checked against the family files (shares_of)."""
    return shares_of(json.loads(RULES.read_text(encoding="utf-8"))["family_shares"], families())
