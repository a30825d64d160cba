"""Assistants under test: the adapters that turn an assistant spec into an `Assistant`
(services/simulator/assistant_protocol.py)."""
