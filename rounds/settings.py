"""One typed settings object, read from the environment (prefix ROUNDS_)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything a Rounds process is configured with.

    The defaults form the *embedded* mode: a SQLite file in the working folder and the SQL event log,
    so a fresh clone runs with no broker and no database server.
    """

    model_config = SettingsConfigDict(env_prefix="ROUNDS_", extra="ignore")

    database_url: str = "sqlite:///rounds.sqlite"
    bus: Literal["sql", "kafka"] = "sql"
    kafka_bootstrap: str | None = None
    kafka_partitions: int = 3
    base_url: str | None = None  # externally visible base, e.g. https://ehr.example.org; wins over proxies
    # FHIR API: reverse proxies whose Forwarded / X-Forwarded-* headers build links (comma-separated IPs and
    # CIDRs, `*` for any peer); unset: no peer is trusted (services/fhir_api/http/forwarded.py)
    trusted_proxies: str | None = None
    api_threads: int | None = None  # FHIR API: store operations at once per process (default: pool size)
    # FHIR API: requests in progress at once per process, the rest queue FIFO (0: no limit); with the database
    # on the same cores 2 kept p99 lowest (services/fhir_api/http/admission.py); raise it for a remote one
    api_concurrency: int = Field(2, ge=0)
    # FHIR API: the longest a database statement may run (PostgreSQL statement_timeout, a SQLite progress
    # handler); past it the request answers 503 with an OperationOutcome (0: unbounded)
    query_timeout_ms: int = Field(15_000, ge=0)
    # Where services that read the record over HTTP (the scorer) find the FHIR API root, e.g.
    # http://fhir:8080; unset: an in-process app on database_url (the embedded default)
    fhir_base: str | None = None
    # FHIR API access control (services/fhir_api/auth): off on the embedded default, on in the compose
    # deployment (ROUNDS_AUTH=on). Tokens are HS256 JWTs signed with ROUNDS_AUTH_KEY (>= 32 bytes), or with a
    # key generated and kept in the database on first use, so every process on that database agrees.
    auth: bool = False
    auth_key: str | None = None
    auth_token_seconds: int = Field(3600, ge=1)  # lifetime of tokens from the token endpoint / CLI
    auth_session_token_seconds: int = Field(86_400, ge=1)  # lifetime of a session's accessToken
    # SMART App Launch: approve an authorization request whose context is complete without the consent page
    # (tests, unattended demos); off, /auth/authorize shows the consent form
    auth_auto_approve: bool = False
    # Bulk Data $export: the folder jobs write their NDJSON files (and state) into, shared by the workers
    bulk_dir: str = "rounds-bulk"

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: str | None) -> str | None:
        """Refuse a malformed list at start-up rather than on the first request that carries the headers."""
        if value is not None and value.strip():
            from services.fhir_api.http.forwarded import trusted_networks

            trusted_networks(value)
            return value
        return None


@lru_cache
def get_settings() -> Settings:
    return Settings()
