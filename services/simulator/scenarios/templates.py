"""Filling the family files' templates: physician text, reference answers and expected-write resources.

Text placeholders are `{name}` or `{name.attr}` (str.format_map over Views); a write template's string that is
exactly "{=name}" becomes the typed value (a number stays a number). A placeholder that names nothing is an
error in the family file, reported with the template."""

from __future__ import annotations

import re
from typing import Any

from services.simulator.scenarios.clock import clock
from services.simulator.scenarios.truth import Truth

TYPED = re.compile(r"^\{=([a-z_][a-z0-9_]*)\}$")


def number(value: Any, decimals: int | None = None) -> str:
    """A number as a clinician writes it: no exponent, no trailing zeros beyond the lab's decimals."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if decimals is not None:
        return f"{value:.{decimals}f}"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


class View:
    """Attribute access over a mapping, for str.format_map."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __format__(self, spec: str) -> str:
        return format(self._values.get("text", ""), spec)


def truth_view(truth: Truth, decimals: int | None) -> View:
    mean_like = truth.kind == "mean"
    value = truth.value
    shown = (
        number(value, decimals if mean_like else None) if truth.present or truth.kind == "count" else "none"
    )
    values: dict[str, Any] = {
        "v": shown,
        "u": truth.unit or "",
        "vu": f"{shown} {truth.unit}".strip() if truth.unit else shown,
        "t": clock(truth.time),
        "ref": truth.refs[0] if truth.refs else "",
        "text": shown,
    }
    for key, extra in truth.extra.items():
        if not key.startswith("_"):
            values[key] = number(extra) if isinstance(extra, int | float) else "" if extra is None else extra
    return View(values)


def render(template: str, context: dict[str, Any]) -> str:
    try:
        return template.format_map(context)
    except (KeyError, AttributeError, IndexError, ValueError) as exc:
        raise ValueError(f"template {template!r}: {exc!r}") from exc


def fill(node: Any, values: dict[str, Any]) -> Any:
    """A write template with its placeholders filled; elements whose reference came out empty are dropped."""
    if isinstance(node, dict):
        out = {}
        for key, child in node.items():
            filled = fill(child, values)
            if filled in (None, {}, {"reference": ""}):
                continue
            out[key] = filled
        return out
    if isinstance(node, list):
        return [fill(child, values) for child in node]
    if isinstance(node, str):
        typed = TYPED.match(node)
        if typed:
            return values[typed.group(1)]
        return render(node, {k: ("" if v is None else v) for k, v in values.items()})
    return node
