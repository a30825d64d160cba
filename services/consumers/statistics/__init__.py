"""Statistics of scored runs: clustered intervals, paired comparisons of two runs, and sample-size planning.

Rounds' sessions are not independent draws: the languages, variants and trials of one scenario share it, so
every interval and test here treats the scenario as the sampled unit (docs/statistics.md says why and how).
Pure numpy over numbers the scorer already computed; it reads the contracts and imports nothing above them.
"""
