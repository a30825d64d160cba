"""Event types are declared on the payload classes: the catalog is built from them, producers infer them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from events import payloads as p
from events.catalog import CATALOG, UnknownEventType, make_event, type_of

REPO = Path(__file__).resolve().parents[2]


def test_every_catalogued_type_is_declared_on_its_payload_class() -> None:
    several = {p.Communication: p.MESSAGE_TYPES, p.FhirResourceChange: p.FhirResourceChange.TYPES}
    for spec in CATALOG:
        declared = several[spec.model].values() if spec.model in several else {spec.model.TYPE}
        assert spec.type in declared, spec.type


def test_make_event_infers_the_type_from_the_payload() -> None:
    message = p.communication("m1", "patient", ["assistant"], "I take metformin.")
    assert make_event(message, source="/t", subject="s1").type == p.PATIENT_MESSAGE
    ended = p.SessionEnded(reason="completed", turns=1)
    assert make_event(ended, source="/t", subject="s1").type == p.SessionEnded.TYPE == "rounds.session.ended"
    change = p.FhirResourceChange(resource_type="Patient", id="p1", version_id="1")
    with pytest.raises(UnknownEventType):
        type_of(change)
    updated = make_event(p.FhirResourceChange.UPDATED, change, source="/t")
    assert updated.type == "rounds.fhir.resource.updated"


SOURCES = ("events", "contracts", "services", "fhir_mapper", "rounds", "scripts", "migrations", "benchmarks")


def test_no_module_of_the_tree_spells_a_type_outside_its_payload_class() -> None:
    """A type string stands once, on its payload class (events/payloads/); every other module of the tree
    (tests apart: they pin the strings on purpose) names the class."""
    spelled = []
    types = {spec.type for spec in CATALOG}
    paths = [path for top in SOURCES for path in (REPO / top).rglob("*.py")]
    assert any(path.is_relative_to(REPO / "rounds") for path in paths)  # the composition root is read too
    for path in paths:
        if path.is_relative_to(REPO / "events" / "payloads"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in types:
                spelled.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value}")
    assert not spelled, spelled
