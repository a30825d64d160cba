"""Rendering a scored run: JSON document (model.py), terminal table, self-contained HTML."""
