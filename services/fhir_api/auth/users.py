"""The people who may approve a SMART App Launch: an operator-managed store (`rounds users add NAME`).

A user has a password (kept as a salted scrypt hash, hashlib: no new dependency), the patients they may see
("*": every patient) and a scope ceiling (what an approval of theirs may grant at most). The authorization
endpoint asks for a login (login.py) before any consent, binds `user/` scopes to the user's grants (a user
who does not see every patient gets a launch only with one of their patients in context: `patient/` scopes
of that patient) and offers only their patients to pick.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, delete, insert, select

from services.fhir_api.auth.models import USERS
from services.fhir_api.auth.scopes import Scope, parse_scopes

EVERY_PATIENT = "*"
# scrypt cost: n=2**14, r=8, p=1 (RFC 7914's interactive-login figures; ~16 MiB, tens of ms per login)
SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_MAXMEM = 64 * 1024 * 1024


@dataclass(frozen=True)
class User:
    name: str
    patients: frozenset[str] | None  # Patient ids; None: every patient
    scope: str  # the most an approval may grant (SMART scopes, space-separated)

    def sees(self, patient: str) -> bool:
        return self.patients is None or patient in self.patients

    @property
    def ceiling(self) -> tuple[Scope, ...]:
        return parse_scopes(self.scope)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def hash_password(password: str) -> str:
    """`scrypt$n$r$p$<salt>$<hash>` (base64)."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, maxmem=_MAXMEM, **SCRYPT)
    return f"scrypt${SCRYPT['n']}${SCRYPT['r']}${SCRYPT['p']}${_b64(salt)}${_b64(digest)}"


def password_matches(stored: str, password: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        computed = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r),
                                  p=int(p), dklen=32, maxmem=_MAXMEM)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(computed, base64.b64decode(digest))


def add_user(engine: Engine, name: str, password: str, patients: list[str] | None,
             scope: str = "user/*.rs") -> User:
    """Create (or replace) a user; `patients` None: every patient. Refuses an empty password, no patients
    or a scope that grants nothing."""
    if not name or len(name) > 128 or not name.isprintable():
        raise ValueError("a user name is 1 to 128 printable characters")
    if len(password) < 8:
        raise ValueError("a password has at least 8 characters")
    if patients is not None:
        patients = [p.removeprefix("Patient/") for p in patients]
        if not patients or any(not p or " " in p for p in patients):
            raise ValueError("give the user's patients (Patient ids) or every patient")
    if not parse_scopes(scope) or any(s.context == "system" for s in parse_scopes(scope)):
        raise ValueError("the scope ceiling needs user/ or patient/ resource scopes (never system/)")
    listed = EVERY_PATIENT if patients is None else " ".join(sorted(set(patients)))
    with engine.begin() as conn:
        conn.execute(delete(USERS).where(USERS.c.name == name))
        conn.execute(insert(USERS).values(name=name, password_hash=hash_password(password), patients=listed,
                                          scope=scope, created_at=datetime.now(UTC)))
    return User(name, None if patients is None else frozenset(patients), scope)


def _user(row) -> User:
    patients = None if row.patients == EVERY_PATIENT else frozenset(row.patients.split())
    return User(row.name, patients, row.scope)


def find_user(engine: Engine, name: str) -> User | None:
    with engine.connect() as conn:
        row = conn.execute(select(USERS).where(USERS.c.name == name)).first()
    return None if row is None else _user(row)


def authenticate_user(engine: Engine, name: str, password: str) -> User | None:
    """The user when the password is theirs; None otherwise (an unknown name costs a hash too)."""
    with engine.connect() as conn:
        row = conn.execute(select(USERS).where(USERS.c.name == name)).first()
    if row is None:
        password_matches(hash_password("not-a-user"), password)  # the same time as a wrong password
        return None
    return _user(row) if password_matches(row.password_hash, password) else None
