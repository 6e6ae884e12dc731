"""What the study's runs say together: the sweep's order and where it stops (sweep_order), the
selection of the per-node workload (selection, selection_io), engine fill (engine_fill), the scaling
relations (scaling) and the scaling and phase models (scaling_models, phase_models). May import
analysis.per_run and the layers below (docs/architecture.md)."""
