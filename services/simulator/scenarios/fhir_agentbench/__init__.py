"""FHIR-AgentBench (Lee et al., ML4H 2025; CC BY 4.0) on Rounds: the peer's question file imported as
single-turn sessions against the loaded record (`rounds scenarios import fhir-agentbench CSV --out FILE`).

rows.py reads and checks the peer's CSV whole; record.py asks the record (patient, gold ids held, the clock);
sessions.py writes one session per question; importer.py counts what was skipped and dropped; cli.py is the
command. The suite's checks are the scorer's `answer_correct`, `retrieval_recall` and `retrieval_precision`
kinds (services/consumers/scoring/checks/kinds/answer_correct.py, retrieval_*.py)."""
