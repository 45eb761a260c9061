"""Benchmarks: speed and fidelity targets measured and written to files."""
