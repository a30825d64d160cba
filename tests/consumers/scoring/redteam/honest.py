"""Honest rephrasings of the oracle: the truth of each turn (its reference answer, its reads and writes),
said the way careful clinicians write it — SI units, chart abbreviations, dates beside the values, Chinese
units and numerals, a long polite answer. A scorer that reads clinical language must score each of them
within 0.05 of the oracle (benchmarks/bench_redteam.py; tests/consumers/scoring/test_v4_redteam.py)."""

from __future__ import annotations

import re
from collections.abc import Callable

from contracts.scenario import Scenario
from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.assistants.oracle import OracleAssistant

Rephrase = Callable[[str, Scenario, int, str], str]
_NUM = r"(\d+(?:\.\d+)?)"
SI = (  # lab names (EN, ZH), the unit written, the SI unit, its factor, its decimals
    (("creatinine", "肌酐"), ("mg/dL", "毫克/分升"), "µmol/L", 88.4, 0),
    (("glucose", "血糖"), ("mg/dL", "毫克/分升"), "mmol/L", 0.0555, 1),
)
ABBREVIATIONS = {"creatinine": "Cr", "potassium": "K", "magnesium": "Mg", "glucose": "Glu", "lactate": "Lac",
                 "hemoglobin": "Hgb", "phosphate": "phos", "bicarbonate": "HCO3", "white count": "WBC",
                 "platelet count": "Plt", "sodium": "Na"}
ZH_UNITS = {"mg/dL": "毫克/分升", "mEq/L": "毫当量/升", "mmol/L": "毫摩尔/升", "K/uL": "×10⁹/L",
            "g/dL": "克/分升"}
ZH_NUMERALS = "零一二三四五六七八九十"


def si_units(text: str, scenario: Scenario, turn: int, language: str) -> str:
    """Creatinine in µmol/L (×88.4, a clinician's factor), glucose in mmol/L."""
    for names, units, si, factor, decimals in SI:
        written = "|".join(map(re.escape, units))
        gap = r"[^.;。；\d]{0,40}?"
        pattern = re.compile(rf"((?:{'|'.join(names)}){gap}){_NUM}\s?(?:{written})", re.IGNORECASE)
        text = pattern.sub(_converter(si, factor, decimals), text)
    return text


def _converter(si: str, factor: float, decimals: int) -> Callable[[re.Match[str]], str]:
    return lambda m: f"{m.group(1)}{float(m.group(2)) * factor:.{decimals}f} {si}"


def abbreviations(text: str, scenario: Scenario, turn: int, language: str) -> str:
    """The chart's abbreviations for the labs (never inside a drug's name: "potassium chloride")."""
    for name, short in ABBREVIATIONS.items():
        text = re.sub(rf"\b{name}\b(?! chloride| sulfate| oxide| citrate)", short, text, flags=re.IGNORECASE)
    return text


def dated(text: str, scenario: Scenario, turn: int, language: str) -> str:
    """Each value of the turn's dated facts followed by its date ("1.8 mg/dL (2/28 17:42)",
    "（2月28日下午5点42分）")."""
    for fact in scenario.turns[turn].facts:
        if fact.time is None or not isinstance(fact.value, int | float) or isinstance(fact.value, bool):
            continue
        t = fact.time
        half = "下午" if t.hour >= 12 else "上午"
        when = (f" ({t.month}/{t.day} {t.hour:02d}:{t.minute:02d})" if language == "en"
                else f"（{t.month}月{t.day}日{half}{t.hour % 12 or 12}点{t.minute}分）")
        units = "|".join(map(re.escape, _units(fact.unit)))
        text = re.sub(rf"(?<![\d.]){re.escape(f'{fact.value:g}')}(\s?(?:{units}))?(?![\d.])",
                      _append(when), text, count=1)
    return text


def _append(when: str) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(0) + when


def _units(unit: str | None) -> list[str]:
    return [u for u in (unit, ZH_UNITS.get(unit or "")) if u] or ["%"]


def chinese(text: str, scenario: Scenario, turn: int, language: str) -> str:
    """ZH answers with Chinese units and small counts in Chinese numerals ("3次" -> "三次")."""
    if language != "zh":
        return text
    for unit, zh in ZH_UNITS.items():
        text = text.replace(unit, zh)
    return re.sub(r"(?<![\d.])([1-9])(?=次|个|项|种)", lambda m: ZH_NUMERALS[int(m.group(1))], text)


def polite(text: str, scenario: Scenario, turn: int, language: str) -> str:
    """The answer inside a long, courteous frame that states nothing else."""
    if language == "zh":
        return ("好的，谢谢您的提问，我已经仔细查阅了病历。" + text
                + "如果您需要，我可以再调出完整的化验历史；其他医嘱保持不变。如有任何问题请随时告诉我。")
    return ("Thanks for asking - I went through the chart carefully before answering. " + text
            + " If you would like, I can pull the full lab history as well; I haven't placed any new orders "
              "beyond what you asked. Please let me know if anything else would help.")


class Rephrased(OracleAssistant):
    """The oracle (its reads, writes and truth), its answer rephrased."""

    def __init__(self, rephrase: Rephrase) -> None:
        super().__init__()
        self.rephrase = rephrase

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        scenario = self.truth[request.session_id]
        text = await super().respond(request, tools)
        return self.rephrase(text, scenario, request.turn, request.language)


HONEST: dict[str, Rephrase] = {"SI units": si_units, "abbreviations": abbreviations,
                               "dates beside values": dated, "Chinese units and numerals": chinese,
                               "long polite answer": polite}


def honest() -> dict[str, Rephrased]:
    """name -> a fresh honest rephraser."""
    return {f"honest: {name}": Rephrased(fn) for name, fn in HONEST.items()}
