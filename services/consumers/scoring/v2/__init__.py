"""Scorer version 2: kept so scores stored under "2" can be re-scored and compared (versions.py)."""
