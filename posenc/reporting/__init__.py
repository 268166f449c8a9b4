"""Reporting: compare runs and sweeps, one run's report, and the reference report of a suite."""
