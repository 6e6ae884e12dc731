"""Engines verl loads as external modules: cpu, verl on CPU for the local site."""
