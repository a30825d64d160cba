"""Where an `openai:` model is served: the spec parsed and checked, the run defaults that fit the endpoint,
and the pre-flight that proves the endpoint answers before any session is opened.

A mistyped spec must never fall through to another endpoint: `openai:m@127.0.0.1:8767/v1` (no scheme) and
`openai:@` (no model) are refused, naming what is wrong, instead of being taken for model names. The
pre-flight lists the endpoint's models (`GET /models`): a model the list does not name stops the run, even on
a server that would answer for any name (llama-cpp-python answers every name with the model it loaded, so a
typo would run the whole benchmark on whatever is loaded), unless the user says the server routes names
itself (`rounds run --any-model-name`); then, or when the server lists nothing, one one-token completion
decides. A base URL whose root answers 404 where `<base>/v1` serves is named with its `/v1` form. Every
refusal names the URL and the model, so one message says what to fix.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import openai

from services.simulator.assistant_protocol import EndpointUnavailable

DEFAULT_BASE = "https://api.openai.com/v1"


@cache
def profiles() -> dict[str, Any]:
    """Run defaults per kind of endpoint (data/endpoint_profiles.json)."""
    return json.loads(resources.files(__package__).joinpath("data/endpoint_profiles.json").read_text())


@dataclass(frozen=True)
class Endpoint:
    model: str
    base_url: str | None  # `@<base_url>`, else OPENAI_BASE_URL; None: the SDK's default (api.openai.com)

    @property
    def url(self) -> str:
        return (self.base_url or DEFAULT_BASE).rstrip("/")

    @property
    def profile(self) -> str:
        """`local` for a server on this machine or a private network, else `hosted`."""
        return "local" if is_local(self.url) else "hosted"


def is_local(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    conf = profiles()
    if host in conf["local_hosts"] or host.endswith(tuple(conf["local_suffixes"])):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def parse_spec(arg: str, what: str = "openai") -> Endpoint:
    """`<model>[@<base_url>]` → the endpoint; ValueError saying what is wrong (the model name, the URL)."""
    model, at, base = arg.strip().partition("@")
    form = (f"{what}: expected <model>[@<base_url>] (e.g. gpt-4o-mini, or "
            "qwen2.5:7b@http://127.0.0.1:11434/v1)")
    if not model:
        raise ValueError(f"{form}: the model name is empty in {arg!r}")
    if any(c.isspace() for c in model):
        raise ValueError(f"{form}: the model name {model!r} contains spaces")
    if not at:
        return Endpoint(model, os.environ.get("OPENAI_BASE_URL") or None)
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = f"; did you mean http://{base}?" if base and "://" not in base else ""
        raise ValueError(f"{form}: the base URL {base!r} after '@' needs http:// or https:// and a host"
                         f"{hint}")
    return Endpoint(model, base.rstrip("/"))


def _refused(exc: openai.APIStatusError) -> str:
    return f"HTTP {exc.status_code}: {exc.message}"


async def preflight(client: openai.AsyncOpenAI, endpoint: Endpoint, list_timeout_s: float = 15.0, *,
                    any_model_name: bool = False) -> str:
    """Prove the endpoint serves the model; returns how (for the run's first line). Raises
    EndpointUnavailable naming the URL and the model when it is unreachable, refuses the key, does not list
    the model (unless `any_model_name`: the server routes names itself) or does not answer for it."""
    url, model = endpoint.url, endpoint.model
    about = f"model endpoint {url} (model {model!r})"
    try:
        listed = [m.id async for m in client.with_options(timeout=list_timeout_s).models.list()]
    except openai.APIConnectionError as exc:
        raise EndpointUnavailable(f"cannot reach the {about}: {exc.__cause__ or exc}") from None
    except openai.AuthenticationError as exc:
        raise EndpointUnavailable(f"the {about} refused the key ({_refused(exc)}): set OPENAI_API_KEY or "
                                  "ROUNDS_OPENAI_API_KEY") from None
    except openai.APIStatusError as exc:
        if exc.status_code == 404 and (suggested := await _v1_form(client, url, list_timeout_s)):
            raise EndpointUnavailable(f"the {about} answers 404 at {url}/models; {suggested} serves the "
                                      f"OpenAI API: use openai:{model}@{suggested}") from None
        listed = []  # no model list on this server: the one-token completion decides
    if model in listed:
        return f"{url} serves {model}"
    if listed and not any_model_name:
        raise EndpointUnavailable(
            f"the {about} does not list {model!r}; it lists {', '.join(sorted(listed)[:10])}. Set MODEL to "
            "a name it lists, or pass --any-model-name if this server routes names itself") from None
    try:
        await client.chat.completions.create(model=model, max_tokens=1,
                                             messages=[{"role": "user", "content": "ping"}])
    except openai.APIConnectionError as exc:
        raise EndpointUnavailable(f"cannot reach the {about}: {exc.__cause__ or exc}") from None
    except openai.AuthenticationError as exc:
        raise EndpointUnavailable(f"the {about} refused the key ({_refused(exc)})") from None
    except openai.APIStatusError as exc:
        serves = f"; it lists {', '.join(sorted(listed)[:10])}" if listed else ""
        raise EndpointUnavailable(f"the {about} did not accept a one-token completion ({_refused(exc)})"
                                  f"{serves}") from None
    return f"{url} answered for {model}" + (f" (it lists {', '.join(sorted(listed)[:3])})" if listed else "")


async def _v1_form(client: openai.AsyncOpenAI, url: str, timeout_s: float) -> str | None:
    """`<url>/v1` when the base URL lacks it and that path lists models (the common slip: the server's root
    instead of its OpenAI prefix), else None."""
    if url.rstrip("/").endswith("/v1"):
        return None
    candidate = f"{url.rstrip('/')}/v1"
    try:
        [m async for m in client.with_options(base_url=candidate, timeout=timeout_s).models.list()]
    except openai.OpenAIError:
        return None
    return candidate
