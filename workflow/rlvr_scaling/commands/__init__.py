"""What each `rlvr-scaling` subcommand does: it reads its arguments and calls the package (cli.py
declares the arguments), one module per group of commands: stage (plan, inputs, preflight, launch,
status), analysis, publish. Each imports what it needs when it runs: `plan` and the rules' lookups
stay fast on a login node, without pandas, matplotlib or anything of the engine."""
