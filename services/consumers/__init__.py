"""Downstream consumers of the session log: scorers, replay and reports."""
