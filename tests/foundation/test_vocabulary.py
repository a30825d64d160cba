"""The clinical vocabulary is written once (contracts/data/vocabulary.json); other data files name it."""

from __future__ import annotations

import json
from pathlib import Path

from contracts.vocabulary import lab_code, phrase, reference, resolve, vocabulary

REPO = Path(__file__).resolve().parents[2]
NAMING = [
    REPO / "services/simulator/assistants/data/baseline_vocabulary.json",
    REPO / "services/consumers/scoring/data/units.json",
]


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


def test_every_reference_names_an_entry_and_no_lab_code_is_copied() -> None:
    labs = vocabulary()["labs"]
    for path in NAMING:
        raw = json.loads(path.read_text(encoding="utf-8"))
        strings = _strings(raw)
        for token in (s for s in strings if s.startswith("@")):
            assert reference(token) is not None, (path.name, token)
        copied = {lab_code(key) for key in labs} & set(strings)
        assert not copied, (path.name, copied)
        assert not [s for s in _strings(resolve(raw)) if s.startswith("@labs.")], path.name


def test_labels_and_phrases_speak_both_languages() -> None:
    for table in ("labels", "phrases"):
        for key, entry in vocabulary()[table].items():
            if key != "_doc" and key != "referral_sbar":  # the SBAR note is written in English only
                assert set(entry) == {"en", "zh"}, (table, key)
    assert phrase("condition")["zh"].format(zh="肌酐") == "我有肌酐。"
