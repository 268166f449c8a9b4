"""Benchmarks of posenc against the reference implementations, measured in the same process.

Run with ``python -m posenc.benchmarks`` or ``posenc bench``. Every figure is a median over repeated
runs from ``torch.utils.benchmark`` with the thread count set explicitly; ratios compare two
measurements taken in the same process, one after the other.
"""
