"""Scorer version 4: every result claim of an answer verified against what the record shows at the clock."""
