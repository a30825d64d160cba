"""What a CDS Hooks service showed in a turn, read from the turn's `rounds.cds.exchange` events: the cards
of a hook, whether the hook fired, a card's severity. Shared by the cds_* kinds (kinds/cds_*.py)."""

from __future__ import annotations

from services.consumers.scoring.check_inputs import CheckContext

SEVERITY = {"info": 0, "warning": 1, "critical": 2}  # CDS Hooks 2.0 card indicators, least to most urgent


def cards_on(ctx: CheckContext, hook: str) -> list[dict]:
    """The cards the turn's calls of `hook` returned (every service declaring it)."""
    return [card for call in ctx.log.cds
            if call.exchange.hook == hook and call.exchange.outcome == "cards"
            for card in call.exchange.cards]


def fired(ctx: CheckContext, hook: str) -> bool:
    """A hook that was not fired shows neither a card nor silence: the cds_* kinds fail it."""
    return any(call.exchange.hook == hook for call in ctx.log.cds)


def severe(card: dict, floor: str) -> bool:
    return SEVERITY.get(str(card.get("indicator")), -1) >= SEVERITY.get(floor, 1)


def hook_and_floor(params: dict) -> tuple[str, str]:
    """The item's hook and the least severe indicator that counts (warning unless it says)."""
    return str(params.get("hook", "")), str(params.get("indicator", "warning"))
