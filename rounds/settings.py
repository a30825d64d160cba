"""One typed settings object, read from the environment (prefix ROUNDS_).

Ground floor: this module imports nothing of the project, so every component can read its configuration
without loading another. Every `ROUNDS_*` variable a component reads is a field here (or of the FHIR API's
`BackboneSettings`) with its docstring; README.md's configuration table is generated from these fields
(`python scripts/gen_config_table.py`) and tests/foundation/test_readme_config.py compares it row by row.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
ANY_PROXY = "*"  # trust every peer: only when the server is reachable through the proxy alone


def proxy_networks(configured: str) -> tuple[Network, ...] | None:
    """The networks of a comma-separated list of IPs and CIDRs (ROUNDS_TRUSTED_PROXIES); None for `*`.
    Raises ValueError on an entry that is neither, so a malformed list fails at start-up."""
    entries = [part.strip() for part in configured.split(",") if part.strip()]
    if ANY_PROXY in entries:
        return None
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


class Settings(BaseSettings):
    """Everything a Rounds process is configured with.

    The defaults form the *embedded* mode: a SQLite file in the working folder and the SQL event log,
    so a fresh clone runs with no broker and no database server.
    """

    model_config = SettingsConfigDict(env_prefix="ROUNDS_", extra="ignore", use_attribute_docstrings=True)

    database_url: str = "sqlite:///rounds.sqlite"
    """SQLAlchemy URL of Rounds' database; PostgreSQL: `postgresql+psycopg://user@host:port/db`"""
    bus: Literal["sql", "kafka"] = "sql"
    """`sql` (embedded log in the database) or `kafka`"""
    kafka_bootstrap: str | None = None
    """Kafka bootstrap servers (`host:port[,host:port]`) when `ROUNDS_BUS=kafka`"""
    kafka_partitions: int = 3
    """partitions of each topic `rounds events topics` (or a service's start) creates"""
    base_url: str | None = None
    """externally visible base URL for absolute FHIR links, e.g. `https://ehr.example.org` (wins over
    forwarded headers)"""
    trusted_proxies: str | None = None
    """reverse proxies whose `Forwarded` / `X-Forwarded-Proto/-Host/-Port/-Prefix` headers build the links, as
    comma-separated IPs and CIDRs (`*`: any peer); from any other peer, and when unset from every peer, they
    are ignored (`serve --trusted-proxies`)"""
    api_threads: int | None = None
    """FHIR API: store operations at once per worker process (`serve --threads`); unset: the connection pool
    size"""
    api_concurrency: int = Field(2, ge=0)
    """FHIR API: requests in progress at once per worker, the rest queue first come, first served (0: no
    limit); with the database on the same cores 2 kept p99 lowest, raise it for a remote one
    (`serve --concurrency`)"""
    query_timeout_ms: int = Field(15_000, ge=0)
    """FHIR API: the longest one database statement may run (PostgreSQL `statement_timeout`, a SQLite progress
    handler); past it the request answers 503 with an OperationOutcome (0: no limit)"""
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1)
    """FHIR API: the largest request body accepted, in bytes; a larger one answers 413
    (`serve --max-body-bytes`)"""
    fhir_base: str | None = None
    """FHIR API root where services that read the record over HTTP (the scorer) find it, e.g.
    `http://api:8080`; unset: an in-process app on `ROUNDS_DATABASE_URL`"""
    auth: bool = False
    """`on` (or `true`): the FHIR API wants bearer tokens with SMART scopes and `POST /sessions` returns a
    session's `accessToken` (services/fhir_api/auth/README.md); off on the embedded default, on in the
    compose deployment"""
    auth_key: str | None = None
    """token-signing secret of the HS256 tokens (≥ 32 bytes); unset: generated and kept in the database on
    first use, so every process on that database agrees"""
    auth_token_seconds: int = Field(3600, ge=1)
    """lifetime of tokens from `POST /auth/token` and `rounds token issue`"""
    auth_session_token_seconds: int = Field(86_400, ge=1)
    """lifetime of a session's `accessToken` (and of the simulator's and scorer's own tokens)"""
    auth_auto_approve: bool = False
    """SMART App Launch: approve an authorization request whose context is complete without the consent page
    (tests, unattended demos); it approves for the logged-in user, or for `auth_auto_approve_user` only"""
    auth_auto_approve_user: str | None = None
    """with `auth_auto_approve`: the user (`rounds users add`) unattended approvals act for when nobody is
    logged in; what it grants is bound to that user's patients and scopes. Unset: a login is required"""
    auth_failed_attempts: int = Field(5, ge=1)
    """failed logins (`/auth/login`) or client authentications (`/auth/token`) allowed per account and per
    client address within `auth_failed_window_s`; more: 429 with Retry-After, before a password is checked"""
    auth_failed_window_s: float = Field(300.0, gt=0)
    """seconds over which `auth_failed_attempts` is counted (a refused account or address may try again
    once its oldest failure is that old)"""
    cors_origins: str = "loopback"
    """origins whose browser apps may call the API (CORS, services/fhir_api/http/cors.py): `loopback` (any
    port of localhost / 127.0.0.1 / [::1]), `*`, `off`, or a comma-separated list of origins"""
    bulk_dir: str = "rounds-bulk"
    """where Bulk Data `$export` jobs write their NDJSON files and state, shared by the workers
    (services/fhir_api/bulk/README.md)"""
    subscription_endpoints: str = "localhost,127.0.0.1,::1,api,simulator,transcript,scorer"
    """hosts (`host` or `host:port`, comma-separated) a Subscription's rest-hook may reach: delivery POSTs
    from inside the deployment, so anything else is refused (server-side request forgery); default loopback
    and the compose network's application services"""
    subscription_headers: str | None = None
    """`channel.header` names a Subscription may set (comma-separated); unset: any but the reserved ones
    (Authorization, Host, Cookie, Proxy-*, Forwarded, Content-*, X-Rounds-*…, always refused)"""
    subscription_timeout_s: float = Field(5.0, gt=0)
    """seconds one Subscription POST may take (connect, send, answer)"""
    subscription_retry_s: float = Field(10.0, ge=0)
    """seconds a failing endpoint's notification is retried (its partition waiting) before its Subscription
    is left `error` and the event passed for it alone"""
    export_jobs_per_token: int = Field(2, ge=1)
    """`$export` jobs in progress at once per access token (more: 429 with Retry-After)"""
    export_jobs_per_session: int = Field(2, ge=1)
    """`$export` jobs in progress at once per base (a session, or the shared record)"""
    export_expiry_hours: float = Field(24.0, gt=0)
    """hours after which an `$export` job and its files are deleted (finished or not)"""
    export_disk_bytes: int = Field(2 * 1024**3, ge=0)
    """bytes all `$export` files may take together (ROUNDS_BULK_DIR); a kick-off beyond it: 429"""
    judge_api_key: str | None = None
    """key for the optional LLM judge (`rounds score --judge MODEL@BASE_URL`)"""
    openai_api_key: str | None = None
    """key of `openai:` assistants, else `OPENAI_API_KEY`; a local server given as `@<base_url>` needs none"""
    simulator_host: str = "127.0.0.1"
    """interface the simulator's patient endpoint listens on when a networked assistant (`http:`) must reach
    it; `0.0.0.0` in a container"""
    simulator_port: int = Field(0, ge=0)
    """TCP port of that endpoint (0: any free port)"""
    simulator_url: str | None = None
    """how others reach that endpoint, e.g. `http://simulator:8090`; unset: the loopback address it listens
    on"""

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: str | None) -> str | None:
        """Refuse a malformed list at start-up rather than on the first request that carries the headers."""
        if value is not None and value.strip():
            proxy_networks(value)
            return value
        return None


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once (services that run for long; a command uses `settings_for`)."""
    return Settings()


def settings_for(database_url: str | None = None, **changes: Any) -> Settings:
    """The settings a command runs with: the environment as it is now (not the process-wide cache, so what
    the shell or a test set counts), with the command's `--database-url` and other options given (not None)
    over the variables."""
    updates = {key: value for key, value in {"database_url": database_url, **changes}.items()
               if value is not None and value != ""}
    return Settings().model_copy(update=updates)
