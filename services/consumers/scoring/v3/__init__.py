"""Scorer version 3: answers parsed into claims attributed to subjects, safety items as gates, writes matched
one to one, precision, future values over the whole record, grounding in what the assistant was given."""
