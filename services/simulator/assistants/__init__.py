"""Assistants under test: the adapters that turn an assistant spec into an `Assistant`
(services/simulator/data_model/assistant.py)."""
