"""Scoring: deterministic rubric checks, the scorer consumer group on rounds.sessions, metrics → RunReport.

Entry points: `score_run(wiring, run_id) -> RunReport` (services/consumers/scoring/api.py), `rounds score`,
`rounds consume scorer`. See README.md.
"""
