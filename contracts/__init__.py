"""Contracts shared by the simulator, the scorer and the report: what all of them speak, below all of them."""
