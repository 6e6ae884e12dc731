"""`snakemake` for the tests' Slurm cluster: job states polled every `seconds-between-status-checks`
(tests/slurm/profile: 2 s), as the profile asks.

snakemake-executor-plugin-slurm backs off on its own: each status check that finds no job finished
adds 10 s to the next wait, up to 180 s, to spare a production cluster's controller. On the test
cluster that noticed a job's end up to a minute late, and the Slurm tests wait on several jobs in
sequence (measured: a one-minute run took 197 s to fail its test, 50 s of it Snakemake asleep after
Slurm had said TIMEOUT). Production (snakemake --profile lumi) runs the plugin as it is, where
minutes-long jobs make the back-off harmless; everything else here is the same Snakemake, plugin and
profiles."""

from __future__ import annotations

import sys

from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor


def _steady(executor: RemoteExecutor) -> float:
    return executor.workflow.remote_execution_settings.seconds_between_status_checks


# The plugin sets the next wait after every check; the wait taken is always the profile's.
RemoteExecutor.next_seconds_between_status_checks = property(_steady, lambda _executor, _value: None)

if __name__ == "__main__":
    from snakemake.cli import main

    sys.argv[0] = "snakemake"
    sys.exit(main())
