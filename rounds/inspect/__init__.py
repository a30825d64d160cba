"""Rounds as an Inspect AI task (`inspect eval rounds/physassist`); see README.md in this folder."""
