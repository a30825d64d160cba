"""The lowest floor: what every component stands on and that knows nothing of the project — the declarative
`Base` and the engine factory (`db.py`), the cycle-collector helpers (`gcpause.py`). The composition root
(rounds/) makes the engine with it and hands it down; nothing here reads settings."""
