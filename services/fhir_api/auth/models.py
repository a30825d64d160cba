"""Tables of access control: the token-signing key and the backend-service clients (revision 0016_auth)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from rounds.db import Base


class AuthKey(Base):
    """The signing key generated on first use when ROUNDS_AUTH_KEY is unset (one row, id 1), so that
    `rounds serve`, its workers and `rounds token issue` on the same database sign and verify alike."""

    __tablename__ = "auth_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    secret: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AuthClient(Base):
    """A backend service allowed the client-credentials grant: its secret's sha256 and its scopes."""

    __tablename__ = "auth_clients"

    client_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    secret_sha256: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


KEYS = AuthKey.__table__
CLIENTS = AuthClient.__table__
