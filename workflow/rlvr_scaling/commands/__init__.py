"""The `rlvr-scaling` subcommands, one module per group: stage (plan, inputs, step settings, preflight,
launch, status), analysis (metrics, summarize, select, sweep-step, index, tables, figures, import) and
publish (report, bundle, sign, compare, history, time-spent, verify). Each module declares its commands'
arguments (`add_commands`, which cli.py calls) beside the functions that read them and call the package.
Each imports what it needs when it runs: `plan` and the rules' lookups stay fast on a login node, without
pandas, matplotlib or anything of the engine. May import every layer (docs/architecture.md)."""
