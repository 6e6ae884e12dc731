"""The preflight: everything checked before any run spends node-hours. `checks` runs them in order
and files the record; `probe` is the source run inside the engine's Python (imports, verl's config
checks); `collective` the all-reduce across nodes and its verdict; `rewards` the rewards' self-check;
`engine_smoke` a few real steps of one run. Their own sub-package: they are the study's gate, not
the launch of one run, though they use the launcher to reach the nodes."""
