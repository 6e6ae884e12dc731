"""The `rlvr-scaling` command: one subcommand per pipeline step; the Snakemake rules call these."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence

from rlvr_scaling.commands import analysis, publish, stage
from rlvr_scaling.errors import StudyError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr-scaling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (stage, analysis, publish):  # each declares its commands' arguments beside them
        group.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `rlvr-scaling plan --json | head`: the reader of our output has gone, which is not an error of
        # ours. Any other broken pipe (a socket, a child process) is.
        if not _stdout_reader_gone():
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 128 + signal.SIGPIPE


def _stdout_reader_gone() -> bool:
    """A pipe whose reading end is closed polls as an error for its writer."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _fd, event in poller.poll(0))
    except (OSError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
