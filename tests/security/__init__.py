"""Attack tests: the hostile requests of each surface, counted; every one must fail."""
