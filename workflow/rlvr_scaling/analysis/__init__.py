"""From the runs' records to the study's numbers: per-run summaries and their validity checks, the
sweep's selection, scaling and phase models, cost and calibration, tables, figures and the reproduction
verdict. May import the layers below it (measured, study, inputs, execution, base): docs/architecture.md."""
