"""What one run measured: its summary and named validity checks (summary), energy per step (energy_use),
MFU (model_flops), the time outside its steps (overhead), whether its steps were disturbed
(disturbance), a run made elsewhere (imported_run), one metrics file judged (metrics_view), and
loading the study's summaries through its per-dataset indexes (results_io). May import measured,
study, inputs, execution and base; nothing else of the analysis (docs/architecture.md)."""
