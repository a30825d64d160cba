"""Projection consumers: exactly-once projections, dead-letter, replay (see README.md)."""
