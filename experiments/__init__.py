"""Experiment protocols: a composed config in, a pandas DataFrame out."""
