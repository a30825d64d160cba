"""`rounds hl7 listen`: an MLLP listener that takes a connector's ORU^R01 and ADT messages into one session
as FHIR writes through the session's base, and acknowledges each (AA written, AE the content could not be
written, AR the message is not taken; MSA-3 and ERR-8 say why).

The writes go over HTTP to the session's FHIR base, as any connector's do: recorded, on the change log,
under the session's token when access control is on, and visible at once to FHIR reads of the session.
A resent message (same MSH-10) is acknowledged AA without a second Observation (conditional create on
its (MSH-10, OBX-1) identifier); A02/A03 are idempotent changes of the visit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
from hl7apy.consts import VALIDATION_LEVEL
from hl7apy.core import Message

from services.fhir_api.hl7 import inbound
from services.fhir_api.hl7.er7 import clip, escape, tables
from services.fhir_api.hl7.mllp import END, START

# ERR-3 (HL7 table 0357) by MSA-1: an application error, or a message of a kind not taken
ERROR_CODES = {"AE": "207^Application internal error^HL70357", "AR": "200^Unsupported message type^HL70357"}


def ack(control: str, code: str, reason: str = "") -> str:
    """An ACK (v2.5.1) of message `control`: MSA-1 `code`, MSA-3 and ERR-8 the reason."""
    t = tables()
    message = Message("ACK", version=t["version"], validation_level=VALIDATION_LEVEL.STRICT)
    msh = message.msh
    msh.msh_3, msh.msh_4 = t["sending"]["application"], escape(t["sending"]["facility"])
    msh.msh_7 = datetime.now(UTC).strftime("%Y%m%d%H%M%S+0000")
    msh.msh_9 = "ACK^^ACK"
    msh.msh_10 = clip(f"ACK{control}", 20)
    msh.msh_11, msh.msh_12 = t["processing_id"], t["version"]
    message.msa.msa_1 = code
    message.msa.msa_2 = clip(escape(control), 20)
    if reason:
        message.msa.msa_3 = clip(escape(reason), 80)
        err = message.add_segment("ERR")
        err.err_3 = ERROR_CODES.get(code, ERROR_CODES["AE"])
        err.err_4 = "E"
        err.err_8 = clip(escape(reason), 250)
    return message.to_er7()


@dataclass
class Listener:
    """Writes what one session's connector sends (see the module docstring)."""

    fhir_base: str
    token: str | None = None
    client: httpx.AsyncClient | None = None
    acks: dict[str, int] = field(default_factory=dict)  # MSA-1 code -> how many (the CLI's report)

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self.client = httpx.AsyncClient(base_url=self.fhir_base.rstrip("/"), headers=headers, timeout=30)
        return self.client

    async def _one(self, path: str, params: dict) -> dict | None:
        response = await self._client().get(path, params=params)
        self._check(response)
        entries = response.json().get("entry") or ()
        return entries[0]["resource"] if entries else None

    @staticmethod
    def _check(response: httpx.Response) -> None:
        if response.status_code >= 400:
            issues = (response.json().get("issue") if "json" in response.headers.get("content-type", "") else
                      None) or [{}]
            text = issues[0].get("diagnostics") or response.reason_phrase
            raise inbound.Rejected("AE", f"the EHR answered {response.status_code}: {text}")

    async def _write(self, message: inbound.Inbound) -> None:
        t = tables()
        ident = t["patient_identifier"]
        who = f"{ident['system']}|{message.patient_identifier}"
        patient = await self._one("/Patient", {"identifier": who})
        if patient is None:
            raise inbound.Rejected("AE", f"unknown patient {message.patient_identifier} (PID-3)")
        subject = f"Patient/{patient['id']}"
        visit_system = t["visit_identifier"]["system"]
        encounter = (await self._one("/Encounter", {"identifier": f"{visit_system}|{message.visit}"})
                     if message.visit else None)
        client = self._client()
        if message.trigger == "R01":
            where = f"Encounter/{encounter['id']}" if encounter else None
            for obs in inbound.observations(message, subject, where):
                key = obs["identifier"][0]
                self._check(await client.post("/Observation", json=obs, headers={
                    "If-None-Exist": f"identifier={key['system']}|{key['value']}"}))
        elif message.trigger in ("A01", "A04"):
            opened = inbound.admitted(message, subject)
            self._check(await client.post("/Encounter", json=opened, headers={
                "If-None-Exist": f"identifier={visit_system}|{message.visit}"}))
        else:
            if encounter is None:
                raise inbound.Rejected("AE", f"unknown visit {message.visit or '(none)'} (PV1-19)")
            updated = inbound.changed(message, encounter)
            self._check(await client.put(f"/Encounter/{encounter['id']}", json=updated))

    async def handle(self, text: str) -> str:
        """The ACK of one message."""
        control = ""
        try:
            message = inbound.read(text)
            control = message.control
            await self._write(message)
            code, reason = "AA", ""
        except inbound.Rejected as exc:
            code, reason = exc.code, exc.reason
        except httpx.HTTPError as exc:
            code, reason = "AE", f"the EHR did not answer: {type(exc).__name__}"
        self.acks[code] = self.acks.get(code, 0) + 1
        return ack(control, code, reason)

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                block = await reader.readuntil(END)
                text = block[block.find(START) + 1:-len(END)].decode("utf-8", errors="replace")
                writer.write(START + (await self.handle(text)).encode("utf-8") + END)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def serve(self, host: str, port: int) -> asyncio.AbstractServer:
        return await asyncio.start_server(self.connection, host, port, limit=1 << 22)

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
