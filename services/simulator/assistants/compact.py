"""Shrink FHIR responses before a model sees them: a tool result is capped in size, never silently cut.

A search Bundle becomes a summary (total, the matching resources, the parameters of the next page); every
resource loses its narrative (`text`) and all of `meta` but the version, long strings are cut with a marker,
and what still exceeds the cap is dropped entry by entry with a note saying how many were left out and how to
narrow the search. The model therefore always gets valid JSON that says when something is missing, and a large
`$everything` or note attachment cannot flood its context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson


@dataclass(frozen=True)
class CompactRules:
    """What to drop and how much to keep (loaded from data/fhir_tools.json)."""

    result_chars: int  # the cap on one tool result as the model sees it (serialized JSON)
    string_chars: int  # strings longer than this are cut with a marker
    drop_keys: frozenset[str]  # top-level resource keys never shown (the XHTML narrative)
    keep_meta: frozenset[str]  # the `meta` fields kept (the version, for updates)


def dumps(value: Any) -> str:
    """The text the model sees for a JSON value (compact, UTF-8, no escaping of non-ASCII)."""
    return orjson.dumps(value).decode()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…[truncated {len(text) - limit} chars]"


def _shorten(value: Any, rules: CompactRules) -> Any:
    if isinstance(value, str):
        return _cut(value, rules.string_chars)
    if isinstance(value, list):
        return [_shorten(v, rules) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v, rules) for k, v in value.items()}
    return value


def compact_resource(resource: dict[str, Any], rules: CompactRules) -> dict[str, Any]:
    """A resource without narrative or bookkeeping, its long strings cut."""
    out: dict[str, Any] = {}
    for key, value in resource.items():
        if key in rules.drop_keys:
            continue
        if key == "meta" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k in rules.keep_meta}
            if not value:
                continue
        out[key] = _shorten(value, rules)
    return out


def next_page(bundle: dict[str, Any]) -> dict[str, str] | None:
    """The query parameters of the Bundle's `next` link: fhir_search takes them back as `params`."""
    for link in bundle.get("link") or []:
        if link.get("relation") == "next" and link.get("url"):
            return dict(parse_qsl(urlsplit(link["url"]).query, keep_blank_values=True))
    return None


def compact_bundle(bundle: dict[str, Any], rules: CompactRules) -> dict[str, Any]:
    """A search Bundle as a summary that fits the cap: matches first, then `_include`d resources."""
    summary: dict[str, Any] = {"resourceType": "Bundle", "type": bundle.get("type")}
    if "total" in bundle:
        summary["total"] = bundle["total"]
    following = next_page(bundle)
    if following is not None:
        summary["next"] = following
    matches, included = [], []
    for entry in bundle.get("entry") or []:
        resource = entry.get("resource")
        if isinstance(resource, dict):
            mode = (entry.get("search") or {}).get("mode")
            (included if mode == "include" else matches).append(compact_resource(resource, rules))
    summary["returned"] = len(matches)
    summary["entry"], kept = _fit(summary, matches, "entry", rules.result_chars)
    if included:
        summary["included"], kept_included = _fit(summary, included, "included", rules.result_chars)
        kept += kept_included
    omitted = len(matches) + len(included) - kept
    if omitted:
        summary["omitted"] = omitted
        summary["note"] = (
            f"{omitted} resources left out to keep this result under {rules.result_chars} characters: "
            "narrow the search (code, date, _count, _elements) or page with `next`"
        )
    return summary


def _fit(summary: dict[str, Any], items: list[dict], key: str, cap: int) -> tuple[list[dict], int]:
    """The longest prefix of `items` that keeps the summary under `cap` (room is left for the note)."""
    used = len(dumps(summary)) + len(key) + 300
    kept: list[dict] = []
    for item in items:
        size = len(dumps(item)) + 1
        if used + size > cap:
            break
        kept.append(item)
        used += size
    return kept, len(kept)


def compact_response(body: Any, rules: CompactRules) -> Any:
    """Any FHIR response body as the model sees it, within the cap."""
    if isinstance(body, dict) and body.get("resourceType") == "Bundle":
        return compact_bundle(body, rules)
    value = compact_resource(body, rules) if isinstance(body, dict) else _shorten(body, rules)
    text = dumps(value)
    if len(text) <= rules.result_chars:
        return value
    return _cut(text, rules.result_chars)  # still too large: the serialized text, cut with its marker
