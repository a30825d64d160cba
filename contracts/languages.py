"""The languages a scenario is written in and a session is run in: every text of the line format has one
version per language, and a run picks one or all of them."""

from __future__ import annotations

from typing import Literal, get_args

Language = Literal["en", "zh"]
LANGUAGES: tuple[Language, ...] = get_args(Language)

# What a `--language` option accepts: one language, or "both" for every language (one session each).
LANGUAGE_CHOICES: dict[str, tuple[Language, ...]] = {
    **{lang: (lang,) for lang in LANGUAGES}, "both": LANGUAGES}
