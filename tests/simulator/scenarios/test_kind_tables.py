"""The binding and anchor kinds are each one table (binding_table.KINDS, anchors.ANCHORS) that the family file
format (families.py) names exactly, and family sizes are explicit shares in data/rules.json: a new family does
not shrink the others' counts without the rules saying so."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from services.simulator.scenarios.anchors import ANCHORS
from services.simulator.scenarios.binding_table import KINDS
from services.simulator.scenarios.builder import split
from services.simulator.scenarios.families import (
    FAMILY_DIR,
    RULES,
    Anchor,
    Binding,
    families,
    family_shares,
    shares_of,
)


def test_the_file_format_names_exactly_the_kinds_the_tables_implement() -> None:
    assert set(get_args(Binding.model_fields["kind"].annotation)) == set(KINDS)
    assert set(get_args(Anchor.model_fields["type"].annotation)) == set(ANCHORS)


def test_every_kind_a_family_file_uses_is_in_its_table() -> None:
    used_bindings, used_anchors = set(), set()
    for family in families().values():
        for definition in family.definitions:
            used_anchors.add(definition.anchor.type)
            used_bindings.update(b.kind for b in definition.bindings)
    assert used_anchors <= set(ANCHORS) and used_bindings <= set(KINDS)
    assert len(used_anchors) >= 4 and len(used_bindings) >= 20  # the families are read


def _table() -> dict[str, float]:
    return json.loads(RULES.read_text(encoding="utf-8"))["family_shares"]


def test_the_rules_give_every_multi_turn_family_its_share() -> None:
    shares = family_shares()
    assert "medagentbench" not in shares and len(shares) == len(families()) - 1
    assert sum(shares.values()) == pytest.approx(1)
    assert len(list(FAMILY_DIR.glob("*.json"))) == len(families())


def test_a_family_added_without_its_share_is_an_error_not_a_smaller_count_for_the_others() -> None:
    known = dict(families())
    known["new_family"] = known["lab_trend"].model_copy(update={"family": "new_family"})
    with pytest.raises(ValueError, match="without a share \\['new_family'\\]"):
        shares_of(_table(), known)
    with pytest.raises(ValueError, match="sum to 1"):  # a share no other family gave up
        shares_of({**_table(), "new_family": 0.125}, known)


def test_a_family_added_with_its_share_leaves_the_others_counts_as_the_rules_say() -> None:
    before = family_shares()
    table = {**_table(), "lab_trend": 0.0625, "new_family": 0.0625}  # lab_trend gives up half of its share
    known = dict(families())
    known["new_family"] = known["lab_trend"].model_copy(update={"family": "new_family"})
    after = shares_of(table, known)
    names = sorted(before)
    counts_before = dict(zip(names, split(64, [before[n] for n in names]), strict=True))
    names_after = sorted(after)
    counts_after = dict(zip(names_after, split(64, [after[n] for n in names_after]), strict=True))
    assert counts_after["new_family"] == counts_after["lab_trend"] == counts_before["lab_trend"] // 2
    assert {n: c for n, c in counts_after.items() if n not in ("lab_trend", "new_family")} == \
        {n: c for n, c in counts_before.items() if n != "lab_trend"}


def test_shares_that_name_no_family_or_are_not_positive_are_refused() -> None:
    with pytest.raises(ValueError, match="not one \\['gone'\\]"):
        shares_of({**_table(), "gone": 0.0}, families())
    with pytest.raises(ValueError, match="positive"):
        shares_of({**_table(), "lab_trend": 0.0, "infection": 0.25}, families())
