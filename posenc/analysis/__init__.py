"""Analysis: permutation tests, numeric properties of schemes, similarity maps and statistics.

Reads models and schemes; never trains or writes run folders.
"""
