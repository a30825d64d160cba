"""The deterministic checks, one class per rubric kind (registry.py maps kinds to them)."""
