"""Where a command's CPU goes, by kind of process: runs the command while reading every process's CPU
time from /proc every 2 s, then prints the core-seconds of each kind (the real trainer's Ray actors,
Snakemake, each `rlvr_scaling` subcommand, pip, the preflight's probes, ...) beside the machine's own
busy core-seconds from /proc/stat.

    python benchmarks/cpu_by_process.py [--every 2] [--samples FILE] -- COMMAND [ARG ...]
    e.g. CI=true python benchmarks/cpu_by_process.py -- bash .ci/run   (from a fresh clone)

A process that lives less than one interval is missed, and one's last interval before it exits: the
sum is under the machine's (2959 of 3401 core-s for a whole .ci/run, 2026-12-06): the rest is short
processes, mostly the tests' own command-line calls. Linux only."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
# The first matching marker names a process's kind; the order puts the specific before the general.
KINDS = (
    ("ray::IDLE", "ray worker starting (imports, before its actor)"),
    ("ray::", "ray actors (verl's trainer, rollout, reward, queue)"),
    # before verl's driver: the probe's own source, on its command line, names verl.trainer
    ("The preflight's check", "preflight probe (verl import, composition)"),
    ("verl.trainer", "verl's driver"),
    ("exec(eval(sys.stdin", "pytest workers"),  # xdist's workers, started through execnet
    ("--target-jobs", "snakemake inside a job"),
    ("snakemake", "snakemake"),
    ("mypy", "mypy"),
    ("pip", "pip"),
    ("mksquashfs", "mksquashfs"),
    ("/ray/", "ray daemons and agents"),
    ("ray.scripts", "ray daemons and agents"),
    ("raylet", "ray daemons and agents"),
    ("gcs_server", "ray daemons and agents"),
    ("pytest", "pytest workers"),
    ("slurm", "slurm daemons and steps"),
    ("mariadbd", "slurm daemons and steps"),
)


def kind_of(command: str) -> str:
    if "-m rlvr_scaling" in command:
        words = command.split("-m rlvr_scaling", 1)[1].split()
        return f"rlvr_scaling {words[0] if words else ''}".strip()
    for marker, kind in KINDS:
        if marker in command:
            return kind
    return "other: " + " ".join(Path(w).name for w in command.split()[:2])[:60]


def cpu_ticks() -> dict[tuple[str, str], int]:
    """(pid, start time) -> user + system ticks so far, for every process readable."""
    found: dict[tuple[str, str], int] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        found[(pid, fields[19])] = int(fields[11]) + int(fields[12])
    return found


def command_of(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def machine_busy_ticks() -> int:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return sum(values) - values[3] - values[4]  # all but idle and iowait


class Sampler(threading.Thread):
    def __init__(self, every_s: float, samples: Path | None) -> None:
        super().__init__(daemon=True)
        self.every_s, self.samples = every_s, samples
        self.by_kind: Counter[str] = Counter()
        self.stop = threading.Event()
        self.before = cpu_ticks()  # what ran before the command is not counted

    def run(self) -> None:
        previous = self.before
        log = open(self.samples, "a") if self.samples else None
        while not self.stop.wait(self.every_s):
            now = cpu_ticks()
            stamp = time.strftime("%H:%M:%S")
            for key, ticks in now.items():
                used = ticks - previous.get(key, 0)
                if used > 0 and key[0] != str(os.getpid()):
                    # only a process that used CPU is read further: most sleep through a reading
                    command = command_of(key[0])
                    self.by_kind[kind_of(command)] += used
                    if log:
                        log.write(f"{stamp} {key[0]} {used} {command[:200]}\n")
            previous = now
        if log:
            log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between readings (default 2)")
    parser.add_argument("--samples", type=Path, help="also write every reading here (time, pid, ticks, command)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (after --)")
    sampler = Sampler(args.every, args.samples)
    busy_before, began = machine_busy_ticks(), time.monotonic()
    sampler.start()
    returncode = subprocess.run(command).returncode
    sampler.stop.set()
    sampler.join()
    wall, busy = time.monotonic() - began, (machine_busy_ticks() - busy_before) / TICKS
    counted = sum(sampler.by_kind.values()) / TICKS
    print(f"\n{' '.join(command)}: exit {returncode}, {wall:.0f} s wall")
    print(f"the machine: {busy:.0f} busy core-s ({100 * busy / (wall * (os.cpu_count() or 1)):.0f}% of its cores)")
    print(f"seen by process: {counted:.0f} core-s (processes shorter than {args.every:g} s are missed)")
    for kind, ticks in sampler.by_kind.most_common(args.top):
        print(f"{ticks / TICKS:9.1f}  {kind}")
    return returncode


if __name__ == "__main__":
    sys.exit(main())
