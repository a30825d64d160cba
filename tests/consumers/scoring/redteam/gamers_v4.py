"""The second red team: the tricks that paid against scorer v3 (issue 36), written against v4 — each
alone (it does not reason) and on top of the baseline ("baseline + trick", which must never score above the
baseline). Plain Assistants run by the real simulator like tests/consumers/scoring/redteam/gamers.py's."""

from __future__ import annotations

import re
from typing import Any

import orjson

from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.assistants.baseline import BaselineAssistant
from services.simulator.assistants.oracle import OracleAssistant
from tests.consumers.scoring.redteam.gamers import IMPERATIVE, Wrapped, _labs

SPRAY = " ".join(str(n) for n in range(41)) + " results"


async def _five_latest(request: TurnRequest, tools: SessionTools) -> str:
    """The five most recent values of each lab the physician names (else of the two labs drawn most), sorted
    newest first, without a date or a word about which is the latest."""
    params = {"patient": request.patient, "_count": "1000", "_sort": "-date"}
    response = await tools.http.get("Observation", params=params)
    if response.status_code >= 400:
        return ""
    by_code: dict[str, list[float]] = {}
    for entry in orjson.loads(response.content).get("entry", []):
        obs = entry.get("resource") or {}
        value = (obs.get("valueQuantity") or {}).get("value")
        code = ((obs.get("code") or {}).get("coding") or [{}])[0].get("code")
        if isinstance(value, int | float) and code:
            by_code.setdefault(code, []).append(value)
    key = "zh" if request.language == "zh" else "en"
    asked = request.message.lower()
    labs = [lab for lab in _labs() if lab[key].lower() in asked and lab["itemid"] in by_code]
    labs = labs or sorted((lab for lab in _labs() if lab["itemid"] in by_code),
                          key=lambda lab: -len(by_code[lab["itemid"]]))[:2]
    return " ".join(f"{lab[key]}: {', '.join(f'{v:g}' for v in by_code[lab['itemid']][:5])}." for lab in labs)


class FiveLatest:
    """The five latest values, undated (the baseline's writes on order-like turns)."""

    spec = "redteam:five-latest"

    def __init__(self) -> None:
        self.baseline = BaselineAssistant()

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        if IMPERATIVE.search(request.message.lower()):
            await self.baseline.respond(request, tools)
        return await _five_latest(request, tools)

    async def aclose(self) -> None:
        return None


class BaselinePlus(Wrapped):
    """The baseline, then a trick appended to its answer (`extra(request, tools) -> text`)."""

    def __init__(self, extra: Any) -> None:
        super().__init__()
        self.extra = extra

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        text = await self.baseline.respond(request, tools)
        return f"{text} {await self.extra(request, tools)}".strip()


async def _stable_no(request: TurnRequest, tools: SessionTools) -> str:
    return "稳定。不需要。" if request.language == "zh" else "Stable. No."


async def _spray(request: TurnRequest, tools: SessionTools) -> str:
    return SPRAY


class StableNo(Wrapped):
    """"Stable. No." on every turn (the baseline's writes on order-like turns)."""

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        if IMPERATIVE.search(request.message.lower()):
            await self.baseline.respond(request, tools)
        return await _stable_no(request, tools)


class CountSpray(Wrapped):
    """Every count from 0 to 40 (the baseline's writes on order-like turns)."""

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        if IMPERATIVE.search(request.message.lower()):
            await self.baseline.respond(request, tools)
        return SPRAY


def finer(text: str, request: TurnRequest) -> str:
    """Beside each decimal value, an invented earlier one written one decimal finer."""
    return re.sub(r"(?<![\d.])(\d+\.\d)(?![\d])",
                  lambda m: f"{m.group(1)} (earlier {float(m.group(1)) + 0.04:.2f})", text)


class IdsOnly(OracleAssistant):
    """Knows the truth from outside the sandbox and reads only ids (`_elements=id`): the answers are
    right, nothing it says was read."""

    spec = "redteam:ids-only"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        scenario = self.truth[request.session_id]
        turn = scenario.turns[request.turn]
        for kind in sorted(turn.sources_by_type()):
            params = {"patient": request.patient, "_elements": "id", "_count": "1000"}
            await tools.http.get(kind, params=params)
        answer = turn.answer
        if request.turn == len(scenario.turns) - 1:
            self.truth.pop(request.session_id, None)
        for write in turn.writes:
            body = {k: v for k, v in write.resource.items() if k != "id"}
            await tools.http.post(write.resource_type, json=body)
        return getattr(answer, request.language) if answer is not None else ""


def gamers_v4() -> dict[str, Any]:
    """name -> a fresh assistant of the second red team (alone)."""
    return {"five latest, undated": FiveLatest(), "Stable. No.": StableNo(), "count spray": CountSpray(),
            "ids only (_elements=id)": IdsOnly()}


def tricks_on_baseline() -> dict[str, Any]:
    """name -> the baseline with one trick added (must never score above the baseline)."""
    return {"baseline + five latest": BaselinePlus(_five_latest),
            "baseline + Stable. No.": BaselinePlus(_stable_no),
            "baseline + count spray": BaselinePlus(_spray),
            "baseline + finer invented values": Wrapped(finer)}
