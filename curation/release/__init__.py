"""Frozen, checksummed releases: Parquet via datasets, images, dataset card, manifest; verify."""
