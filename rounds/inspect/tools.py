"""Rounds' tools as Inspect tools: the same names, descriptions and JSON Schemas the `openai:` adapter sends
(services/simulator/assistants/data/fhir_tools.json), as `ToolInfo` the model is given every turn.

Inspect's own tool execution is not used: it would answer an unknown tool or arguments against the schema
itself (and turn a `TimeoutError` into a tool error), where Rounds' contract decides who is charged. Every
call runs through Rounds' `ToolExecutor` (services/simulator/assistants/fhir_tools.py), as for `openai:`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from inspect_ai.tool import ToolInfo, ToolParams

from services.simulator.assistants.fhir_tools import toolset


@cache
def tool_infos() -> tuple[ToolInfo, ...]:
    """The tool set as Inspect ToolInfo (what a provider turns into its function-calling form)."""
    return tuple(ToolInfo(name=spec.name, description=spec.description,
                          parameters=ToolParams.model_validate(spec.parameters))
                 for spec in toolset().tools)


def schema_of(info: ToolInfo) -> dict[str, Any]:
    """The JSON Schema Inspect sends for a tool's arguments (what a provider sees)."""
    return info.parameters.model_dump(exclude_none=True)
