"""From the runs' records to the study's numbers, in five layers, each importing only those before it:
per_run (what one run measured), across_runs (what the runs say together), cost (what it costs),
shown (tables and figures) and verdict (whether it reproduced). docs/architecture.md."""
