"""What one run measured, read the same way while it runs and after: its metrics file or console log
(metrics_file, console_log, metrics), the statistics over its steps (stats), the summary's data model
(models) and the adaptive step rule (adaptive_steps). The launcher reads a run's metrics live (the
step clock, the adaptive stop, the engine smoke's verdict) and the analysis reads them afterwards, so
this sits below both. It imports nothing of the package but the base layer (docs/architecture.md)."""
