"""Projections that emit events, for the emit/retry tests and the fault test's subprocess.

`ScoringProjection` turns each doctor message into a `rounds.score.turn` event emitted in its transaction
(and a row of its own); `ScoreCounter` is the downstream consumer that counts each score event it applies.
"""

from __future__ import annotations

from sqlalchemy import Column, String
from sqlalchemy.schema import SchemaItem

from events.bus import Record
from events.catalog import CATALOG
from events.payloads import ScoreTurn
from events.projections.projection import Projection, ProjectionTx

SOURCE = "/tests/scorer"


class ScoringProjection(Projection):
    name = "test_scoring"
    types = frozenset({"rounds.message.doctor"})

    def __init__(self, scores_topic: str, suffix: str = "", topics: tuple[str, ...] | None = None) -> None:
        super().__init__(suffix, topics)
        self.scores_topic = scores_topic

    def schema(self) -> dict[str, list[SchemaItem]]:
        return {"scored": [Column("message_id", String(100), primary_key=True),
                           Column("session_id", String(100))]}

    def score_event(self, record: Record):
        message = record.event.data
        return CATALOG.make("rounds.score.turn", ScoreTurn(scorer="test", metric="length", value=1.0,
                            message_id=message["id"], turn=0), source=SOURCE, subject=record.key)

    def handle(self, tx: ProjectionTx, record: Record) -> None:
        tx.insert("scored", {"message_id": record.event.data["id"], "session_id": record.key})
        tx.emit(self.score_event(record), topic=self.scores_topic)


class ScoreCounter(Projection):
    name = "test_score_counter"
    types = frozenset({"rounds.score.turn"})

    def schema(self) -> dict[str, list[SchemaItem]]:
        return {"scores": [Column("event_id", String(100), primary_key=True),
                           Column("message_id", String(100))]}

    def handle(self, tx: ProjectionTx, record: Record) -> None:
        tx.insert("scores", {"event_id": record.event.id, "message_id": record.event.data["messageId"]})
