"""Rounds: shared settings, database plumbing and the `rounds` command line."""

__version__ = "0.1.0"
