"""The encounter picker of a standalone launch (`launch/encounter`): which of the chosen patient's
Encounters the user may put in context.

They are read through the launch's own view of the record — the audience session's `Context`, so a session
confined to a clock shows (and accepts) only the stays that clock shows, exactly what the app's token will
then read there. A picked id is accepted only when the same search finds it; the consent form is a browser's
answer and may name anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.fhir_api.store.interface import Context, ResourceStore, SearchRequest

PICKER_SIZE = 100  # the newest stays first; a patient of MIMIC-IV's demo has at most a few dozen


@dataclass(frozen=True)
class EncounterChoice:
    """One option of the picker: the id and what a user recognises a stay by."""

    id: str
    label: str


def _label(raw: bytes) -> str:
    resource = json.loads(raw)
    period = resource.get("period", {})
    kind = resource.get("class", {}).get("display") or resource.get("class", {}).get("code", "")
    when = " – ".join(p for p in (period.get("start", ""), period.get("end", "")) if p)
    return " · ".join(p for p in (kind, when, resource.get("status", "")) if p)


async def view(store: ResourceStore, session: str | None) -> Context:
    """The record as the launch sees it: the session's (with its clock), or the shared record."""
    ctx = await store.get_session_async(session) if session is not None else None
    return ctx or Context()


async def patient_encounters(store: ResourceStore, ctx: Context, patient: str) -> list[EncounterChoice]:
    """The patient's Encounters `ctx` shows, newest first."""
    found = await store.search_async(ctx, SearchRequest(
        "Encounter", [("patient", patient), ("_sort", "-date")], count=PICKER_SIZE))
    return [EncounterChoice(r.id, _label(r.raw)) for r in found.matches]


async def is_patient_encounter(store: ResourceStore, ctx: Context, patient: str, encounter: str) -> bool:
    """Whether `encounter` is one of the patient's that `ctx` shows."""
    found = await store.search_async(ctx, SearchRequest(
        "Encounter", [("_id", encounter), ("patient", patient)], count=1))
    return bool(found.matches)
