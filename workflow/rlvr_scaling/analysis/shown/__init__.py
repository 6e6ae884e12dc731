"""How the study is shown: tables (tables) and their files (table_files), figures (figures,
figure_models) and what each plots (figure_data). May import analysis.cost, analysis.across_runs,
analysis.per_run and the layers below (docs/architecture.md)."""
