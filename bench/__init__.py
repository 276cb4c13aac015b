"""Benchmarks: SafeDB against a bare-SDK reference server, side by side (`python -m bench.run`)."""
