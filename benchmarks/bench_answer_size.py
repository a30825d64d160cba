"""Scorers v4's and v3's time per KB of answer (the rules are linear in the answer's length): one session of
tests/consumers/scoring/world.py's scenario whose first answer is a dense dump of labelled and
unlabelled values (about one number per 12 characters, the worst case of a value dumper), scored in memory;
then the same sizes in its conclusion turn (turn 1, a trend), values mixed with conclusion cues about two
subjects, hedged and negated ones (its conclusion claims are parsed too).

    python benchmarks/bench_answer_size.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.consumers.scoring.numbers import cited_numbers  # noqa: E402
from services.consumers.scoring.scorer import score_session  # noqa: E402
from tests.consumers.scoring.v3.v3_world import SCENARIO, log  # noqa: E402

CHUNK = "Creatinine 1.8 mg/dL, sodium 140 mEq/L, 2.3 4.5; "
CUES = "Creatinine 1.8 mg/dL, rising; potassium is stable, not falling, may be higher. 2.3 4.5; "


def main() -> None:
    session, state = log({0: CHUNK, 1: CUES})
    score_session(session, SCENARIO, state)  # data files, patterns, caches
    print("| answer | turn | numbers | v4 seconds | v4 ms per KB | v3 seconds | v2 seconds |")
    print("|---|---|---|---|---|---|---|")
    for turn, chunk, what in ((0, CHUNK, "values"), (1, CUES, "conclusion")):
        for kb in (1, 10, 100):
            text = chunk * (kb * 1024 // len(chunk))
            session, state = log({turn: text})
            started = time.process_time()
            score_session(session, SCENARIO, state)
            v4 = time.process_time() - started
            started = time.process_time()
            score_session(session, SCENARIO, state, version="3")
            v3 = time.process_time() - started
            v2 = "-"  # version 2 is quadratic in the answer: timed on the smaller answers only
            if kb <= 10:
                started = time.process_time()
                score_session(session, SCENARIO, state, version="2")
                v2 = f"{time.process_time() - started:.3f}"
            print(f"| {len(text) / 1024:.0f} KB | {turn} ({what}) | {len(cited_numbers(text)):,} | {v4:.3f} "
                  f"| {v4 * 1000 / kb:.1f} | {v3:.3f} | {v2} |")


if __name__ == "__main__":
    main()
