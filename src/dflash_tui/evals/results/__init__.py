"""Eval results: the store and its schema, collecting from hosts, leaderboards, progress, calibration pairs, served-results records."""
