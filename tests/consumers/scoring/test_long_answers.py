"""Reading a long answer fast must not change what it reads: the words before a number are read from a
short tail (numbers.py `_last_tokens`), and each run of words is searched once for a cue (the memos of
numbers.py and v4/tokens.py) — the same tokens, bounds and classes as reading the whole window each time."""

from __future__ import annotations

import random

import pytest

from services.consumers.scoring.numbers import _EN_TOKEN, _last_tokens, cited_numbers, is_threshold
from services.consumers.scoring.text import normalize
from services.consumers.scoring.v4.tokens import number_class

WORDS = ["below", "less", "than", "up", "from", "creatinine", "mic", "ratio", "x" * 47, "≥", "<=", "5",
         "sodium", "dose", "of", "a" * 60, "-", "results", "hours", ",", "(", "\n"]


@pytest.mark.parametrize("before", [
    "", "a", "below", "x" * 60 + " below", "below " + "y" * 100, " ".join(["abc"] * 50),
    "value less than <= " + "z" * 45, "up " + "q" * 46 + " x",
])
def test_the_last_words_are_those_of_the_whole_window(before: str) -> None:
    for n in (1, 3, 5):
        assert _last_tokens(before, n) == _EN_TOKEN.findall(before)[-n:]


def test_random_windows_read_the_same_from_their_tail() -> None:
    rng = random.Random(36)
    for _ in range(2000):
        before = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30)))[-160:]
        assert _last_tokens(before, 3) == _EN_TOKEN.findall(before)[-3:], before


def test_a_repeated_context_is_classed_the_same_everywhere() -> None:
    """The memo is keyed by the words themselves: the same words classify a number the same wherever they
    stand, and different words differently."""
    text = "Creatinine up 0.3 to 1.8 mg/dL; below 3.5; vancomycin MIC 0.5; BUN/Cr ratio 20; " * 3
    norm = normalize(text)
    numbers = cited_numbers(text)
    classes = [number_class(norm, c.start, c.start + len(c.text), c.unit) for c in numbers]
    bounds = [is_threshold(text, c, norm) for c in numbers]
    assert classes[:5] == ["delta", "result", "result", "mic", "ratio"] and classes == classes[:5] * 3
    assert bounds[:5] == [False, False, True, False, False] and bounds == bounds[:5] * 3
