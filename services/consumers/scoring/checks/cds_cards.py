"""What a CDS Hooks service showed in a turn, read from the turn's `rounds.cds.exchange` events: the cards
of a hook, whether the hook fired, a card's severity. Shared by the cds_* kinds (kinds/cds_*.py)."""

from __future__ import annotations

from dataclasses import dataclass

from services.consumers.scoring.check_inputs import CheckContext, CheckResult

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


@dataclass(frozen=True)
class HookCards:
    """What one fired hook showed in the turn: every card, and the least severe indicator that counts."""

    hook: str
    floor: str
    cards: list[dict]

    @property
    def severe(self) -> list[dict]:
        """The cards at or above the floor, in the order shown."""
        return [card for card in self.cards if severe(card, self.floor)]


def hook_cards(params: dict, ctx: CheckContext, unfired: str) -> HookCards | CheckResult:
    """The cards of the item's hook (cds_card, cds_no_card), or the item's failure when the hook was not
    fired (`unfired`: what the failure adds to "HOOK was not fired in this turn")."""
    hook, floor = hook_and_floor(params)
    if not fired(ctx, hook):
        return CheckResult(False, f"{hook} was not fired in this turn{unfired}")
    return HookCards(hook, floor, cards_on(ctx, hook))
