"""Assistant specs → assistants: `baseline`, `oracle`, `weak`, `python:<module>:<callable>`, `http:<url>`,
`openai:<model>[@<base_url>]`, `mcp[:...]`,
`cds-hooks:<url of /cds-services>`.

Each kind is a factory `create(arg: str) -> Assistant` named by its module path, imported only when that
kind is asked for (the `openai` and `mcp` SDKs load only for those specs). Adding a kind is one line here.
"""

from __future__ import annotations

import importlib

from services.simulator.assistant_protocol import Assistant

# spec prefix (before the first ':') -> "module:factory"; the rest of the spec is the factory's argument.
FACTORIES: dict[str, str] = {
    "baseline": "services.simulator.assistants.baseline:create",
    "oracle": "services.simulator.assistants.oracle:create",
    "weak": "services.simulator.assistants.weak:create",
    "python": "services.simulator.assistants.python_adapter:create",
    "http": "services.simulator.assistants.http_adapter:create",
    "https": "services.simulator.assistants.http_adapter:create_https",
    "openai": "services.simulator.assistants.openai_chat:create",
    "mcp": "services.simulator.assistants.mcp_agent:create",
    "cds-hooks": "services.simulator.assistants.cds_hooks:create",
}


class UnknownAssistant(ValueError):
    """The spec names no known kind of assistant."""


# Kinds whose factory takes the configured model key (ROUNDS_OPENAI_API_KEY) after its argument.
MODEL_KEYED: frozenset[str] = frozenset({"openai"})


def create_assistant(spec: str, api_key: str | None = None) -> Assistant:
    """The assistant a command-line spec names (its `spec` attribute is the spec as given); `api_key`: the
    configured model key, handed to the kinds that call a model endpoint (MODEL_KEYED)."""
    kind, _, arg = spec.partition(":")
    target = FACTORIES.get(kind)
    if target is None:
        raise UnknownAssistant(f"unknown assistant {spec!r}: expected one of {', '.join(sorted(FACTORIES))}")
    module_name, _, factory = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise UnknownAssistant(f"assistant kind {kind!r} is not available yet ({module_name})") from None
        raise
    make = getattr(module, factory)
    assistant = make(arg, api_key) if kind in MODEL_KEYED else make(arg)
    assistant.spec = spec
    return assistant


def needs_network(assistant: Assistant) -> bool:
    """Whether the assistant runs in another process and so needs real URLs for FHIR and the patient."""
    return bool(getattr(assistant, "needs_network", False))
