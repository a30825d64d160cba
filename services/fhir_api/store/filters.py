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
    # (rid column, binder) -> whether that resource has a matching row, read by its rid: how the filter
    # applies after a driving filter has narrowed the search to a few rows (query.py `Plan.where`)
    probe: Callable[[Any, Binder], ColumnElement] | None = None
    # one reference by id (`patient=<id>`): its rows are few whatever the store's size, so it drives
    drives: bool = False
    narrowed: bool = False  # its rows are already one patient's (token rows by keys.patient_key)
