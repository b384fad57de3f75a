"""Scoring: the protocols, judges, caches, DV, LS, Overall and steps."""
