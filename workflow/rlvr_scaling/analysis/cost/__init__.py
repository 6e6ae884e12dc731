"""What the study costs: calibration of node-hours from measured runs (calibration), each run's cost
predicted against measured (cost_check), the budget (budget), what the adaptive step count and the
sequential sweep saved (adaptive_report, sweep_savings), and predictions at node counts not measured
(prediction_view). May import analysis.across_runs, analysis.per_run and the layers below."""
