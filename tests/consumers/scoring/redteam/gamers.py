"""The red team: assistants that try to buy scores without clinical reasoning, each a plain
Assistant (`respond(request, tools) -> str`) run by the real simulator like `python:` assistants are.

Most start from the baseline (its reads, its writes, its text) and then game one rule; the dumpers, the
stuffer, the hedger and the echoer do not reason at all. `GAMERS` names every one for the benchmark and the
tests. The future-teller reads the future from outside the sandbox (as an in-process `python:` assistant
could: it is handed the whole record at construction).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.assistants.baseline import BaselineAssistant
from services.simulator.scenarios.vocabulary import vocabulary

IMPERATIVE = re.compile(r"\b(order|write|send|record|update|change|start|place|document)\b"
                        r"|开立|开|下|记录|发送|更新|调整")
CUES = ("going up, going down, stable, increasing, decreasing, unchanged, yes, no, needed, not needed, "
        "ordered, abnormal, normal, covered, 升高, 下降, 稳定, 需要, 不需要, 是的, 不是, 异常, 正常")
Future = dict[str, list[tuple[str, float, str]]]
SWAPS = (("mg/dL", "mmol/L"), ("mEq/L", "mEq"), ("K/uL", "K"), ("g/dL", "g/L"), ("毫克/分升", "毫摩尔/升"))


def _labs() -> list[dict]:
    return list(vocabulary()["labs"].values())


async def _observations(tools: SessionTools, patient: str) -> list[dict]:
    response = await tools.http.get("Observation", params={"patient": patient, "_count": "1000"})
    if response.status_code >= 400:
        return []
    return [e["resource"] for e in orjson.loads(response.content).get("entry", []) if "resource" in e]


def _name(obs: dict) -> str:
    code = obs.get("code") or {}
    return code.get("text") or ((code.get("coding") or [{}])[0].get("display")) or "result"


class Wrapped:
    """The baseline, then `alter(text, request)` on its answer."""

    spec = "redteam"

    def __init__(self, alter: Callable[[str, TurnRequest], str] | None = None) -> None:
        self.baseline = BaselineAssistant()
        self.alter = alter

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        text = await self.baseline.respond(request, tools)
        return self.alter(text, request) if self.alter else text

    async def aclose(self) -> None:
        return None


class ValueDumper:
    """Every value of the patient, unlabelled and without units, plus mean/min/max and the counts 0..40; one
    catch-all question to the patient in turn 0; the baseline's writes on every imperative turn."""

    spec = "redteam:value-dumper"

    def __init__(self, labelled: bool = False) -> None:
        self.baseline, self.labelled = BaselineAssistant(), labelled

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        parts = []
        if request.turn == 0:
            parts.append(await tools.ask_patient("Tell me everything: medicines, conditions, symptoms."))
        if IMPERATIVE.search(request.message.lower()):
            await self.baseline.respond(request, tools)
        observations = await _observations(tools, request.patient)
        values = [float(o["valueQuantity"]["value"]) for o in observations
                  if isinstance((o.get("valueQuantity") or {}).get("value"), int | float)]
        if self.labelled:
            parts += [f"{_name(o)} {o['valueQuantity']['value']} {o['valueQuantity'].get('unit', '')}"
                      for o in observations if "valueQuantity" in o]
        else:
            parts.append(" ".join(f"{v:g}" for v in values))
            if values:
                parts.append(f"{sum(values) / len(values):.2f} {min(values):g} {max(values):g}")
            parts.append(" ".join(str(n) for n in range(41)))
        return "; ".join(parts)

    async def aclose(self) -> None:
        return None


class Stuffer:
    """Every lab name, drug name and conclusion cue, no values."""

    spec = "redteam:keyword-stuffer"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        names = [n for lab in _labs() for n in (lab["en"], lab["zh"])]
        drugs = [d["en"] for d in vocabulary()["drugs"].values() if isinstance(d, dict)]
        return ", ".join(names + drugs) + ". " + CUES

    async def aclose(self) -> None:
        return None


class Hedger:
    """Names the lab the physician names and hedges every way."""

    spec = "redteam:hedger"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        if request.language == "zh":
            return "数值可能升高也可能下降或稳定；可能需要也可能不需要，结果可能正常也可能异常。"
        return ("It may be going up, it might be going down or it could be stable; possibly yes, possibly "
                "no; the result may be normal or abnormal.")

    async def aclose(self) -> None:
        return None


class Echoer:
    """Repeats the physician's question (its cue words included) and asks the patient the same."""

    spec = "redteam:question-echoer"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        return f"{request.message} {request.message}"

    async def aclose(self) -> None:
        return None


class WriteSpammer(Wrapped):
    """The baseline, plus one transaction of every plausible order (a lab order per lab, a potassium
    chloride order with every dose) on every turn (`every_turn`) or on the order-like ones."""

    def __init__(self, every_turn: bool = True) -> None:
        super().__init__()
        self.every_turn = every_turn

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        text = await self.baseline.respond(request, tools)
        if self.every_turn or IMPERATIVE.search(request.message.lower()):
            await tools.http.post("", json=spam_bundle(request.patient))
        return text


def spam_bundle(patient: str) -> dict[str, Any]:
    orders = [{"resourceType": "ServiceRequest", "status": "active", "intent": "order",
               "subject": {"reference": patient},
               "code": {"coding": [{"system": "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems",
                                    "code": lab["itemid"]} for lab in _labs()]}}]
    orders.append({"resourceType": "MedicationRequest", "status": "active", "intent": "order",
                   "subject": {"reference": patient},
                   "medicationCodeableConcept": {"text": "potassium chloride"},
                   "dosageInstruction": [{"doseAndRate": [{"doseQuantity": {"value": v, "unit": "mEq"}}]}
                                         for v in range(10, 110, 10)]})
    orders += [{"resourceType": "Communication", "status": "completed", "subject": {"reference": patient},
                "payload": [{"contentString": "FYI"}]}]
    return {"resourceType": "Bundle", "type": "transaction",
            "entry": [{"resource": r, "request": {"method": "POST", "url": r["resourceType"]}}
                      for r in orders]}


def swap_units(text: str, request: TurnRequest) -> str:
    for old, new in SWAPS:
        text = text.replace(old, new)
    return text


def wrong_values(text: str, request: TurnRequest) -> str:
    """Every decimal number 30 % off: right subjects, wrong facts."""
    return re.sub(r"(?<![\d:-])(\d+\.\d+)(?![\d:-])", lambda m: f"{float(m.group(1)) * 1.3:.1f}", text)


def rotate_subjects(text: str, request: TurnRequest) -> str:
    """Each lab name replaced by the next lab's: the values stay, their subjects are wrong."""
    labs = _labs()
    key = "zh" if request.language == "zh" else "en"
    names = [lab[key] for lab in labs]
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)), re.I)
    index = {n.lower(): i for i, n in enumerate(names)}
    return pattern.sub(lambda m: names[(index[m.group().lower()] + 1) % len(names)], text)


class FutureTeller(Wrapped):
    """The baseline, plus "it will be V on the next draw" for the first result after the clock of the lab
    the physician names (or any lab): read from the whole record, outside the sandbox."""

    def __init__(self, future: Future) -> None:
        super().__init__()
        self.future = future  # "patient|now" -> [(lab name en, value, unit)] after that clock

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        text = await self.baseline.respond(request, tools)
        later = self.future.get(f"{request.patient}|{request.now}") or []
        if not later:
            return text
        named = [f for f in later if f[0].lower() in request.message.lower()] or later
        _, value, unit = named[0]
        tail = {"en": f" It will be {value:g} {unit} on the next draw.", "zh": f"下次会是{value:g} {unit}。"}
        return text + tail[request.language]


def gamers(future: Future) -> dict[str, Any]:
    """name -> a fresh assistant of the red team."""
    return {
        "value dumper (unlabelled)": ValueDumper(),
        "value dumper (labelled)": ValueDumper(labelled=True),
        "keyword stuffer": Stuffer(),
        "hedger": Hedger(),
        "question echoer": Echoer(),
        "write spammer": WriteSpammer(),
        "unit swapper": Wrapped(swap_units),
        "future-teller": FutureTeller(future),
        "subject rotator": Wrapped(rotate_subjects),
    }
