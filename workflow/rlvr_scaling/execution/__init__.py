"""Running the plan: the launcher, its Ray cluster over Slurm, the guard, failed runs, provenance, storage,
the preflight and the engine smoke. May import measured, study, inputs and base (docs/architecture.md);
what the analysis decides (the selections) its callers pass in."""
