"""The LUMI study rehearsed whole on the tests' Slurm cluster (`make rehearse`): the LUMI site's plan,
sbatch lines, the `lumi` profile's executor, the hang guard, time limits, preflight and engine smoke,
the sequential sweep, the selection, the 18 scaling runs, the analysis, the verdict against the
published reference and the bundle, with the stand-in trainer stepping at the published timings
(tests/published_timings.py), every duration of the study compressed by one factor.

- compress: what changes in the LUMI site, the study and the reference, each change with its reason;
- scratch: the clone the rehearsal runs in (its config/ compressed), its stand-in inputs, its profile;
- outcome: what the rehearsal shows, read from its results (every figure scaled back);
- shown: those findings as a person reads them, and the checks that make it fail;
- __main__: `python -m tests.rehearsal`, the whole of it.
"""
