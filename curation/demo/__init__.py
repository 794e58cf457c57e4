"""Deterministic synthetic raw corpus in the real download layouts of each source."""
