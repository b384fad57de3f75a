"""VGI: its scoring, filter, leaderboard, pages and steps."""
