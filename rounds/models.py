"""Installation-wide tables that belong to no single component."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, String, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from foundation.db import Base


class InstallationInfo(Base):
    """Key/value facts about this installation (schema owner, loaded datasets, ...)."""

    __tablename__ = "rounds_info"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
