"""The operator's user store: `rounds users add` hashes the password (scrypt, salted: never the password
itself), keeps the user's patients and ceiling, and refuses what would make a useless or unsafe user;
`rounds token client` registers apps with exact redirect URIs (public or confidential)."""

from __future__ import annotations

from sqlalchemy import create_engine, select
from typer.testing import CliRunner

from rounds.cli import app as cli
from services.fhir_api.auth.clients import authenticate, find_client
from services.fhir_api.auth.models import USERS
from services.fhir_api.auth.users import authenticate_user, password_matches

PASSWORD = "a long enough password"


def test_users_add_keeps_a_salted_scrypt_hash_and_the_grants(sqlite_url: str) -> None:
    run = CliRunner().invoke
    added = run(cli, ["users", "add", "cleo", "--patient", "Patient/p1", "--patient", "p2",
                      "--password-stdin", "--database-url", sqlite_url], input=PASSWORD + "\n")
    assert added.exit_code == 0, added.output
    assert "p1, p2" in added.output
    engine = create_engine(sqlite_url)
    stored = engine.connect().execute(select(USERS.c.password_hash)).scalar_one()
    assert stored.startswith("scrypt$") and PASSWORD not in stored and password_matches(stored, PASSWORD)
    again = run(cli, ["users", "add", "dora", "--all-patients", "--password-stdin", "--database-url",
                      sqlite_url], input=PASSWORD + "\n")
    assert again.exit_code == 0, again.output
    dora = select(USERS.c.password_hash).where(USERS.c.name == "dora")
    dora_hash = engine.connect().execute(dora).scalar_one()
    assert dora_hash != stored  # salted: the same password, another hash
    user = authenticate_user(engine, "cleo", PASSWORD)
    assert user is not None and user.sees("p1") and not user.sees("p3") and user.scope == "user/*.rs"
    assert authenticate_user(engine, "dora", PASSWORD).sees("anyone")
    assert authenticate_user(engine, "cleo", PASSWORD + "x") is None
    assert authenticate_user(engine, "nobody", PASSWORD) is None
    for bad in (["--all-patients", "--patient", "p1"], [], ["--all-patients", "--scope", "system/*.rs"]):
        refused = run(cli, ["users", "add", "eve", *bad, "--password-stdin", "--database-url", sqlite_url],
                      input=PASSWORD + "\n")
        assert refused.exit_code == 2, (bad, refused.output)
    short = run(cli, ["users", "add", "eve", "--all-patients", "--password-stdin", "--database-url",
                      sqlite_url], input="short\n")
    assert short.exit_code == 2 and "8 characters" in short.output
    assert authenticate_user(engine, "eve", "short") is None


def test_token_client_registers_public_and_confidential_apps(sqlite_url: str) -> None:
    run = CliRunner().invoke
    public = run(cli, ["token", "client", "--id", "pub", "--scope", "user/*.rs", "--public",
                       "--redirect-uri", "https://app.example/cb", "--database-url", sqlite_url])
    assert public.exit_code == 0, public.output
    confidential = run(cli, ["token", "client", "--id", "conf", "--scope", "user/*.rs",
                             "--redirect-uri", "https://app.example/cb", "--fhir-base",
                             "http://rounds/sessions/s1/fhir/", "--database-url", sqlite_url])
    secret = confidential.output.strip()
    assert confidential.exit_code == 0 and len(secret) > 30
    engine = create_engine(sqlite_url)
    pub, conf = find_client(engine, "pub"), find_client(engine, "conf")
    assert not pub.confidential and pub.redirect_uris == ("https://app.example/cb",) and pub.fhir_base is None
    assert conf.confidential and conf.fhir_base == "http://rounds/sessions/s1/fhir"
    assert authenticate(engine, "conf", secret) is not None and authenticate(engine, "pub", "") is None
    for bad in (["--public"], ["--public", "--secret", "s", "--redirect-uri", "https://a/cb"],
                ["--redirect-uri", "javascript:alert(1)"], ["--redirect-uri", "https://a/cb#frag"]):
        refused = run(cli, ["token", "client", "--id", "x", "--scope", "user/*.rs", *bad,
                            "--database-url", sqlite_url])
        assert refused.exit_code == 2, (bad, refused.output)
