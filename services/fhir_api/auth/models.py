"""Tables of access control: the token-signing key, the registered clients (revision 0016_auth), the
users who may approve a SMART App Launch (0017_auth_users), the id_token key and revoked tokens (0018)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from foundation.db import Base


class AuthKey(Base):
    """The signing keys generated on first use, so that `rounds serve`, its workers and `rounds token issue`
    on the same database sign and verify alike: id 1 the access tokens' HS256 secret (when ROUNDS_AUTH_KEY is
    unset), id 2 the id_tokens' RSA private key (PEM, oidc.py; 0018_auth_oidc)."""

    __tablename__ = "auth_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    secret: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AuthClient(Base):
    """A registered client: its secret's sha256 ("" for a public client, whose proof is PKCE), the scopes it
    may be granted, the redirect URIs an authorization may send it back to (exact match, space-separated) and
    the FHIR base it is registered for (None: the server's own `/fhir`)."""

    __tablename__ = "auth_clients"

    client_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    secret_sha256: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    redirect_uris: Mapped[str] = mapped_column(Text, default="", server_default="")
    fhir_base: Mapped[str | None] = mapped_column(Text, nullable=True)
    jwks: Mapped[str | None] = mapped_column(Text, nullable=True)  # private_key_jwt: a JWKS, or its https URL


class AuthUser(Base):
    """Someone who may log in at /auth/login and approve an app's launch: a scrypt password hash, the
    patients they may see ("*": every patient) and the most their approval may grant (SMART scopes)."""

    __tablename__ = "auth_users"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    password_hash: Mapped[str] = mapped_column(String(300))
    patients: Mapped[str] = mapped_column(Text)  # Patient ids, space-separated, or "*"
    scope: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AuthRevoked(Base):
    """A token revoked before it expired (RFC 7009, revocation.py): its `jti`, kept until it would have
    expired anyway (0018_auth_oidc)."""

    __tablename__ = "auth_revoked"

    jti: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


KEYS = AuthKey.__table__
REVOKED = AuthRevoked.__table__
CLIENTS = AuthClient.__table__
USERS = AuthUser.__table__
