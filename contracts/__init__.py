"""What the simulator, the scorer and the report share: the scenario line format and its rubric kinds, the
score model, end reasons and who is charged for them, the language set and the clinical vocabulary.

This floor stands on `events` and `rounds.settings` only, so the services above it (the simulator and the
consumers) can depend on it without depending on each other.
"""
