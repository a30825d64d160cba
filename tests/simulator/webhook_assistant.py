"""An assistant in another process: a webhook (`http:` spec) that works the session's FHIR base and patient
endpoint itself, with the session's `accessToken` as its bearer token when it is handed one (auth on). Run as
`python tests/simulator/webhook_assistant.py PORT`; it prints READY when serving."""

from __future__ import annotations

import sys

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def answer(request: Request) -> JSONResponse:
    turn = await request.json()
    base, patient = turn["fhirBase"], turn["patient"]
    token = turn.get("accessToken")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=headers) as fhir:
        if turn["message"] == "garbage":
            return JSONResponse({"no": "text"})
        if turn["message"] == "loop":
            for _ in range(12):
                await fhir.get("Observation", params={"patient": patient, "_count": "1"})
            return JSONResponse({"text": "looked twelve times"})
        if turn["turn"] == 1:
            question = {"text": "Do you take any painkillers, ibuprofen?"}
            said = await fhir.post(turn["patientUrl"], json=question)
            return JSONResponse({"text": f"She says: {said.json()['text']}"})
        if turn["turn"] == 3:
            order = (await fhir.get("MedicationRequest/sim-apix-1")).json()
            order["dosageInstruction"] = [{"text": "5 mg twice daily"}]
            await fhir.put("MedicationRequest/sim-apix-1", json=order)
            return JSONResponse({"text": "Apixaban updated to 5 mg twice daily."})
        found = (await fhir.get("Observation", params={"patient": patient, "code": "50912",
                                                        "_sort": "-date", "_count": "1"})).json()
        value = found["entry"][0]["resource"]["valueQuantity"]["value"]
        return JSONResponse({"text": f"Creatinine {value} mg/dL (turn {turn['turn']}, "
                                     f"{len(turn['history'])} earlier messages, {turn['language']})"})


app = Starlette(routes=[Route("/answer", answer, methods=["POST"])])

if __name__ == "__main__":
    config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
    server = uvicorn.Server(config)
    print("READY", flush=True)
    server.run()
