"""Running the plan: the launcher, its Ray cluster over Slurm, the guard, failed runs, provenance, storage and
the preflight."""
