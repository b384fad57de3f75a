"""Leaderboard statistics and comparability: noise, run identity, the released runs."""
