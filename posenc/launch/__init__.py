"""Launching many runs: Hydra multirun sweeps and suites of sweeps, and their aggregated tables."""
