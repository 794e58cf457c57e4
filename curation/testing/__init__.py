"""Helpers for tests and benchmarks: local servers that speak real protocols."""
