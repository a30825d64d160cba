"""Alembic environment: the script alembic runs for every migration (from `rounds db upgrade` and from a typed
`alembic ...`). What it does — the URL, the engine, the complete metadata of the model registry — is the
composition root's (rounds/migrate.py `run_environment`), so nothing below the root migrates or imports it."""

from __future__ import annotations

from alembic import context

from rounds.migrate import run_environment

run_environment(context)
