"""An applied search parameter (`Filter`) and how its SQL binds values (`Binder`): the unit the query
compiler (query.py) and the composite parameters (composite.py) both build and combine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select
from sqlalchemy.sql.elements import BindParameter

Binder = Callable[[str, Any], BindParameter]


@dataclass
class Filter:
    """One applied search parameter: its shape (part of a statement's cache key; None when the SQL depends on
    more than the shape, as for chains and _has), its values by bind name, and how to build its SQL on r."""

    key: tuple | None
    values: dict[str, Any]
    make: Callable[[Any, Binder], ColumnElement | Select]  # (alias r, binder) -> condition or rid Select
