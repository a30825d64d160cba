"""The per-session MCP endpoint with access control on: only the session's own token (or a managing one) gets
through, and the tools then call the sandbox with that token."""

from __future__ import annotations

import asyncio

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from services.simulator.assistants.mcp_server import TurnRegistry, mount_mcp
from tests.simulator.adapters.conftest import Record, Served
from tests.wiring import store_on


async def search_over_mcp(url: str, token: str, record: Record):
    client = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with client, streamable_http_client(url, http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool("fhir_search", {"resourceType": "Observation",
                                                       "params": {"patient": record.patient}})


def test_mcp_endpoint_takes_the_sessions_token_only(record: Record) -> None:
    app = create_app(Settings(database_url=record.database_url, auth=True), store_on(record.database_url))
    mount_mcp(app, TurnRegistry())
    served = Served(app)
    try:
        admin = issue(app.state.auth.key, parse_scopes("system/*.cruds"), expires_in=600)
        opened = [httpx.post(f"{served.root}/sessions", json={}, headers={"Authorization": f"Bearer {admin}"})
                  .json() for _ in range(2)]
        mine, other = opened
        url = f"{served.root}/sessions/{mine['id']}/mcp"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert httpx.post(url, json=call).status_code == 401
        refused = httpx.post(url, json=call, headers={"Authorization": f"Bearer {other['accessToken']}"})
        assert refused.status_code == 403 and refused.json()["resourceType"] == "OperationOutcome"
        found = asyncio.run(search_over_mcp(url, mine["accessToken"], record))
        assert not found.is_error, found.content[0].text
        assert '"resourceType":"Bundle"' in found.content[0].text.replace(" ", "")
    finally:
        served.stop()
