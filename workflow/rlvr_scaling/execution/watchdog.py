"""A guard the run's processes cannot outlive: when the launcher dies, its run dies with it.

verl and Ray leave the launcher's process group (verl is started in its own session, Ray's daemons
in theirs), so a kill of the workflow's process group, SIGKILL included, used to leave the whole
trainer running and the staging folder in results/runs/ for good. The launcher therefore starts this
guard first, in a session of its own, and holds the write end of a pipe whose read end is the guard's
stdin. The launcher writes "done" once it has cleaned up and filed the run itself; end of file without
it means the launcher is gone, and the guard ends every process carrying the run's token and files the
staging folder under results/failed/ with a note.

On a Slurm cluster the job's cgroup ends everything when the job ends; the guard covers the launcher
dying while the job (or the local workflow) goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.execution.failed_runs import file_failed, now
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, end_processes

DONE = b"done\n"
PACKAGE_PARENT = str(paths.PACKAGE_DIR.parent)


class Guard:
    """The launcher's side: keep the pipe open while the run lives, release when it is filed."""

    def __init__(self, token: str, staging: Path | None, failed: Path | None) -> None:
        """`staging` None: nothing to file (the preflight's engine smoke), only processes to end."""
        read_end, self._write_end = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
        # The package from where this launcher has it, without putting anything on PYTHONPATH.
        start = (
            f"import sys; sys.path.append({PACKAGE_PARENT!r}); from rlvr_scaling.execution.watchdog import main; main()"
        )
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", start, token, str(staging or ""), str(failed or ""), str(os.getpid())],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)

    def release(self, done: bool) -> None:
        """Let the guard go. `done`: the launcher has ended the run's processes and filed its directory;
        otherwise (its own cleanup was interrupted) the guard ends what is left. Never raises: the
        run's outcome is decided already."""
        try:
            if done:
                os.write(self._write_end, DONE)
        except OSError as exc:  # the guard died before us: nothing to tell it
            print(f"rlvr-scaling: the run's guard had gone ({exc})", file=sys.stderr)
        finally:
            os.close(self._write_end)
        try:
            self.process.wait(timeout=60 if done else 30)
        except subprocess.TimeoutExpired:
            print(f"rlvr-scaling: the run's guard (pid {self.process.pid}) is still cleaning up", file=sys.stderr)


def guard(token: str, staging: Path | None, failed: Path | None, launcher_pid: str) -> int:
    # The guard outlives signals meant for the run (Slurm's SIGTERM reaches every process of the job
    # step); it exits when its pipe says so.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    message = sys.stdin.buffer.read()  # until the launcher writes DONE and closes, or dies
    if message == DONE:
        return 0
    ended = end_processes(token, grace_s=3.0)  # the run is lost already: no need to wait long
    if staging is not None and failed is not None and staging.is_dir():  # the launcher passes both or neither
        note = (
            f"The launcher (pid {launcher_pid}) was killed at about {now()} before it finished the run; its "
            f"guard ended {len(ended)} process(es) of the run and filed it here."
        )
        file_failed(staging, failed, note, status="killed", end=now(), problems=[note])
    return 0


def main() -> None:
    staging, failed = (Path(arg) if arg else None for arg in sys.argv[2:4])
    sys.exit(guard(sys.argv[1], staging, failed, sys.argv[4]))


if __name__ == "__main__":
    main()
