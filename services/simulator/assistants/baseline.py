"""`baseline` — a deterministic assistant that really works the chart through FHIR search.

What it understands is data (data/baseline_vocabulary.json): lab names in EN and ZH → codes, cue words for
intents (latest, trend, 24-hour mean, medication, order, update, replacement, ask the patient) and the
MedAgentBench replacement rules. Per turn it finds the entity the physician names — or carries the last one
(simple anaphora: "the creatinine" … "does it …") — and answers with searches by patient + code, date windows
relative to the session clock, `_sort` and paging (`next` links), reads the medication list with `_include`,
writes orders (POST) and updates (PUT) through the session's FHIR base, and asks the patient when the words
call for it. It stays within the step limit (at most a handful of requests per turn).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import orjson

from contracts.languages import LANGUAGES
from contracts.vocabulary import resolve
from services.simulator.agents.patient import mentions
from services.simulator.assistant_protocol import AssistantFailure, SessionTools, TurnRequest

VOCABULARY = Path(__file__).parent / "data" / "baseline_vocabulary.json"
MAX_PAGES = 3
# What the baseline reads of a medication list (the rest of each order stays on the server).
MEDICATION_ELEMENTS = "status,intent,medicationCodeableConcept,medicationReference,subject,authoredOn," \
    "dosageInstruction,code"


@cache
def vocabulary() -> dict:
    """The baseline's words, its labs' codes and names as the clinical vocabulary has them (`@labs...`)."""
    return resolve(json.loads(VOCABULARY.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class Entity:
    kind: str  # "lab" | "drug"
    name: str  # lab key in the vocabulary, or the drug's name as the chart has it


def find_lab(text: str) -> str | None:
    """The lab the text names (the longest matching term wins: "hemoglobin a1c" is HbA1c, not hemoglobin)."""
    best: tuple[int, str] | None = None
    for name, lab in vocabulary()["labs"].items():
        for term in (*lab["terms"]["en"], *lab["terms"]["zh"]):
            if mentions(text, term) and (best is None or len(term) > best[0]):
                best = (len(term), name)
    return best[1] if best else None


def intents(text: str) -> set[str]:
    return {
        name
        for name, cues in vocabulary()["intents"].items()
        if any(mentions(text, cue) for lang in LANGUAGES for cue in cues[lang])
    }


def _value(obs: dict) -> tuple[float | str | None, str]:
    if "valueQuantity" in obs:
        quantity = obs["valueQuantity"]
        return quantity.get("value"), quantity.get("unit") or quantity.get("code") or ""
    return obs.get("valueString"), ""


def _when(obs: dict) -> str:
    return obs.get("effectiveDateTime") or obs.get("issued") or "?"


def _say(key: str, language: str, **values: Any) -> str:
    return vocabulary()["words"][key][language].format(**values)


def medication_name(request: dict, included: dict[str, dict]) -> str:
    concept = request.get("medicationCodeableConcept")
    if concept is None:
        reference = (request.get("medicationReference") or {}).get("reference", "")
        concept = (included.get(reference) or {}).get("code") or {}
    coding = (concept.get("coding") or [{}])[0]
    return concept.get("text") or coding.get("display") or coding.get("code") or "?"


def dose_text(request: dict) -> str:
    dosage = (request.get("dosageInstruction") or [{}])[0]
    if dosage.get("text"):
        return dosage["text"]
    dose = ((dosage.get("doseAndRate") or [{}])[0].get("doseQuantity")) or {}
    route = ((dosage.get("route") or {}).get("coding") or [{}])[0].get("code", "")
    return " ".join(str(x) for x in (dose.get("value"), dose.get("unit"), route) if x) or "dose not recorded"


def new_dose(text: str) -> str | None:
    """The new dosing in an update request: what follows "to" / "改成" / "为"."""
    match = re.search(r"(?:\bto\b|改成|改为|调整为|更新为)\s*(.+?)[.?!。？！]*$", text.strip(), re.IGNORECASE)
    return match.group(1).strip() if match else None


class TurnFhirClient:
    """The FHIR calls of one turn (each one a step; 5xx raise so the orchestrator can charge them)."""

    def __init__(self, http: httpx.AsyncClient, patient: str) -> None:
        self.http, self.patient = http, patient

    async def _json(self, response: httpx.Response) -> dict:
        if response.status_code >= 400:
            if response.status_code >= 500:
                response.raise_for_status()
            raise AssistantFailure(
                f"the FHIR server refused {response.request.method} "
                f"{response.request.url}: {response.status_code} {response.text[:200]}"
            )
        return orjson.loads(response.content)

    async def search(self, type_: str, params: dict[str, str], pages: int = 1) -> list[dict]:
        bundle = await self._json(await self.http.get(type_, params=params))
        entries = list(bundle.get("entry", []))
        for _ in range(pages - 1):
            following = next(
                (link["url"] for link in bundle.get("link", []) if link["relation"] == "next"), None
            )
            if following is None:
                break
            bundle = await self._json(await self.http.get(following))
            entries += bundle.get("entry", [])
        return [e["resource"] for e in entries if "resource" in e]

    async def labs(self, lab: str, **params: str) -> list[dict]:
        """The lab's results by its MIMIC code, then (only if there are none) by its other codes: one code
        per search is the index's fast path, and MIMIC-IV labs carry the MIMIC code."""
        first, *others = vocabulary()["labs"][lab]["codes"]
        pages = int(params.pop("pages", "1"))
        found = await self.search("Observation", {"patient": self.patient, "code": first, **params}, pages)
        if found or not others:
            return found
        return await self.search("Observation", {"patient": self.patient, "code": ",".join(others), **params},
                                 pages)

    async def medications(self) -> tuple[list[dict], dict[str, dict]]:
        found = await self.search(
            "MedicationRequest",
            {
                "subject": self.patient,
                "_include": "MedicationRequest:medication",
                "_sort": "-authoredon",
                "_count": "100",
                "_elements": MEDICATION_ELEMENTS,
            },
        )
        requests = [r for r in found if r["resourceType"] == "MedicationRequest"]
        included = {f"Medication/{r['id']}": r for r in found if r["resourceType"] == "Medication"}
        return requests, included

    async def write(self, method: str, path: str, resource: dict) -> dict:
        return await self._json(await self.http.request(method, path, json=resource))


class BaselineAssistant:
    spec = "baseline"

    def __init__(self) -> None:
        self.last: dict[str, Entity] = {}  # session -> the entity the conversation is about

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        text, lang = request.message.lower(), request.language
        cues = intents(text)
        chart = TurnFhirClient(tools.http, request.patient)
        parts: list[str] = []
        if "patient" in cues:
            parts.append(_say("patient_says", lang, text=await tools.ask_patient(request.message)))
        entity = Entity("lab", lab) if (lab := find_lab(text)) else None
        medications: tuple[list[dict], dict[str, dict]] | None = None
        if entity is None and (cues & {"medication", "update"} or not parts):
            medications = await chart.medications()
            entity = self._drug_named(text, *medications) or self.last.get(request.session_id)
        if entity is None:
            return " ".join(parts) or _say("unknown", lang)
        self.last[request.session_id] = entity
        if entity.kind == "lab":
            parts.append(await self._lab(chart, entity.name, cues, request))
        else:
            parts.append(await self._drug(chart, entity.name, cues, request, medications))
        return " ".join(parts)

    @staticmethod
    def _drug_named(text: str, requests: list[dict], included: dict[str, dict]) -> Entity | None:
        names = vocabulary()["drug_names_zh"]
        text += " " + " ".join(en for zh, en in names.items() if not zh.startswith("_") and zh in text)
        for med in requests:
            name = medication_name(med, included)
            words = [w for w in re.split(r"[^a-z0-9\u3400-\u9fff]+", name.lower()) if len(w) >= 4]
            if any(mentions(text, w) for w in words[:2]):
                return Entity("drug", name)
        return None

    async def _lab(self, chart: TurnFhirClient, lab: str, cues: set[str], request: TurnRequest) -> str:
        lang = request.language
        label = vocabulary()["labs"][lab]["label"][lang]
        now = datetime.fromisoformat(request.now)
        rules = vocabulary()["replacement_rules"]
        if "replace" in cues and lab in rules:
            return await self._replace(chart, lab, request)
        if "order" in cues or (lab == "hba1c" and "order" in cues):
            return await self._order_lab(chart, lab, request)
        if "mean" in cues or "window24" in cues:
            since = (now - timedelta(hours=24)).isoformat()
            found = await chart.labs(lab, date=f"ge{since}", _sort="date", _count="100", pages=str(MAX_PAGES))
            values = [v for v in (_value(o)[0] for o in found) if isinstance(v, int | float)]
            if not values:
                return _say("none", lang, label=label)
            mean = round(sum(values) / len(values), 2)
            value = f"{mean} {_value(found[0])[1]}".strip()
            return _say("mean", lang, label=label, value=value, n=len(values))
        if "trend" in cues:
            found = await chart.labs(lab, _sort="-date", _count="10")
            series = [o for o in reversed(found) if isinstance(_value(o)[0], int | float)]
            if len(series) < 2:
                return await self._latest(chart, lab, label, lang)
            first, last = _value(series[0])[0], _value(series[-1])[0]
            direction = "up" if last > first else "down" if last < first else "unchanged"
            return _say(
                "trend",
                lang,
                label=label,
                first=first,
                first_when=_when(series[0]),
                last=last,
                last_when=_when(series[-1]),
                n=len(series),
                direction=vocabulary()["words"]["direction"][direction][lang],
            )
        return await self._latest(chart, lab, label, lang, previous="previous" in cues)

    async def _latest(
        self, chart: TurnFhirClient, lab: str, label: str, lang: str, previous: bool = False
    ) -> str:
        """The latest result, or (`previous`: "and before?") the measured one before it (results without a
        value, such as MIMIC's de-identified '___', are not counted)."""
        found = await chart.labs(lab, _sort="-date", _count="5" if previous else "1")
        if previous:
            found = [o for o in found if isinstance(_value(o)[0], int | float)] or found
        if not found:
            return _say("none", lang, label=label)
        key = "latest" if not previous else "previous" if len(found) > 1 else "no_previous"
        obs = found[1] if key == "previous" else found[0]
        value, unit = _value(obs)
        return _say(key, lang, label=label, value=f"{value} {unit}".strip(), when=_when(obs))

    async def _order_lab(self, chart: TurnFhirClient, lab: str, request: TurnRequest) -> str:
        entry = vocabulary()["labs"][lab]
        system, _, code = entry["codes"][0].partition("|")
        await chart.write(
            "POST",
            "ServiceRequest",
            {
                "resourceType": "ServiceRequest",
                "status": "active",
                "intent": "order",
                "code": {"coding": [{"system": system, "code": code}], "text": entry["label"]["en"]},
                "subject": {"reference": request.patient},
                "authoredOn": request.now,
            },
        )
        return _say("ordered", request.language, what=entry["label"][request.language])

    async def _replace(self, chart: TurnFhirClient, lab: str, request: TurnRequest) -> str:
        """MedAgentBench: replace magnesium / potassium by tier of the latest value (recheck potassium)."""
        lang, rule = request.language, vocabulary()["replacement_rules"][lab]
        label = vocabulary()["labs"][lab]["label"][lang]
        found = await chart.labs(lab, _sort="-date", _count="1")
        value = _value(found[0])[0] if found else None
        if not isinstance(value, int | float):
            return _say("none", lang, label=label)
        if "tiers" in rule:
            tier = next((t for t in rule["tiers"] if value < t[0]), None)
            dose = (tier[1], tier[2], tier[3]) if tier else None
        else:
            steps = round((rule["below"] - value) / rule["per_step"])
            dose = (steps * rule["dose_per_step"], rule["unit"], None) if value < rule["below"] else None
        if dose is None:
            return _say("no_replacement", lang, label=label, value=value)
        drug = rule["drug"]
        dosage: dict[str, Any] = {
            "route": {"text": "IV"},
            "doseAndRate": [{"doseQuantity": {"value": dose[0], "unit": dose[1]}}],
        }
        if dose[2]:
            dosage["doseAndRate"][0]["rateQuantity"] = {"value": dose[0], "unit": f"{dose[1]}/{dose[2]}"}
        await chart.write(
            "POST",
            "MedicationRequest",
            {
                "resourceType": "MedicationRequest",
                "status": "active",
                "intent": "order",
                "medicationCodeableConcept": {
                    "coding": [{"system": drug["system"], "code": drug["code"]}],
                    "text": drug["en"],
                },
                "subject": {"reference": request.patient},
                "authoredOn": request.now,
                "dosageInstruction": [dosage],
            },
        )
        said = _say("ordered", lang, what=f"{drug['en']} {dose[0]} {dose[1]} ({label} {value})")
        if rule.get("recheck"):
            said += " " + await self._order_lab(chart, rule["recheck"], request)
        return said

    async def _drug(
        self,
        chart: TurnFhirClient,
        name: str,
        cues: set[str],
        request: TurnRequest,
        medications: tuple[list[dict], dict[str, dict]] | None,
    ) -> str:
        lang = request.language
        requests, included = medications or await chart.medications()
        matching = [m for m in requests if medication_name(m, included) == name]
        if not matching:
            return _say("no_medication", lang, name=name)
        current = matching[0]
        if "update" in cues and (dosing := new_dose(request.message)):
            full = await chart._json(await chart.http.get(f"MedicationRequest/{current['id']}"))  # whole
            updated = {**full, "dosageInstruction": [{"text": dosing}], "status": "active"}
            await chart.write("PUT", f"MedicationRequest/{current['id']}", updated)
            return _say("updated", lang, name=name, dose=dosing)
        return " ".join(
            _say(
                "medication",
                lang,
                name=name,
                dose=dose_text(m),
                status=m.get("status", "?"),
                when=m.get("authoredOn", "?"),
            )
            for m in matching[:3]
        )

    async def aclose(self) -> None:
        self.last.clear()


def create(arg: str = ""):
    """`baseline`, or a suite's own floor: `baseline:fhir-agentbench` (table_baseline.py)."""
    if arg == "fhir-agentbench":
        from services.simulator.assistants.table_baseline import TableBaseline

        return TableBaseline()
    if arg:
        raise ValueError(f"unknown baseline {arg!r}: expected baseline or baseline:fhir-agentbench")
    return BaselineAssistant()
