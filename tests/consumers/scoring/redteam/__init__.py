"""Gaming assistants: what a team trying to top the leaderboard without clinical reasoning would run."""
