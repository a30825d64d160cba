"""OpenID Connect for SMART: the `id_token` of a launch that was granted `openid`, signed RS256 with a key
the JWKS (`/auth/jwks`, discovery's `jwks_uri`) publishes, so an app can check who approved it.

The RSA key is generated on first use and kept beside the HS256 secret (`auth_keys` row 2, a PEM), the same
way and for the same reason: every worker and process on the database signs with the one key the JWKS
shows. Its `kid` is the RFC 7638 thumbprint.

Claims (OpenID Connect Core §2, SMART App Launch §scopes-for-requesting-identity-data): `iss` the server's
root (discovery's `issuer`), `sub` the user's name, `aud` the client id, `iat`, `exp`, `nonce` when the
authorization request had one, and with the `fhirUser` scope `fhirUser`: the user as a FHIR resource,
`<FHIR base>/Practitioner/<user name>` (the operator's user store names the people who approve; the record
itself holds no practitioner for them).
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime

from joserfc import jwt
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from services.fhir_api.auth.models import KEYS

ID_TOKEN_KEY_ROW = 2
ALGORITHM = "RS256"


def id_token_key(engine: Engine) -> RSAKey:
    """The deployment's id_token key: the first process to need it generates and inserts it."""
    dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
    with engine.connect() as conn:
        pem = conn.execute(select(KEYS.c.secret).where(KEYS.c.id == ID_TOKEN_KEY_ROW)).scalar_one_or_none()
    if pem is None:
        fresh = RSAKey.generate_key(2048).as_pem(private=True).decode()
        row = {"id": ID_TOKEN_KEY_ROW, "secret": fresh, "created_at": datetime.now(UTC)}
        with engine.begin() as conn:  # the first process wins; the others read its key
            conn.execute(dialect.insert(KEYS).values(**row).on_conflict_do_nothing(index_elements=["id"]))
            pem = conn.execute(select(KEYS.c.secret).where(KEYS.c.id == ID_TOKEN_KEY_ROW)).scalar_one()
    return RSAKey.import_key(pem.encode())


def jwks(key: RSAKey) -> dict:
    """The JSON Web Key Set of `/auth/jwks`: the public half only."""
    public = key.as_dict(private=False)
    return {"keys": [{**public, "kid": key.thumbprint(), "use": "sig", "alg": ALGORITHM}]}


def fhir_user(base: str, user: str) -> str:
    return f"{base.rstrip('/')}/Practitioner/{user}"


def id_token(key: RSAKey, *, issuer: str, user: str, client_id: str, lifetime: int, nonce: str = "",
             fhir_user_url: str | None = None) -> str:
    now = int(time.time())
    claims: dict = {"iss": issuer, "sub": user, "aud": client_id, "iat": now, "exp": now + lifetime,
                    "jti": secrets.token_hex(16)}
    if nonce:
        claims["nonce"] = nonce
    if fhir_user_url:
        claims["fhirUser"] = fhir_user_url
    return jwt.encode({"alg": ALGORITHM, "typ": "JWT", "kid": key.thumbprint()}, claims, key)
