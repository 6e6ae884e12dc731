"""The `rlvr-scaling` command: one subcommand per pipeline step; the Snakemake rules call these."""

from __future__ import annotations

import argparse
import math
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.commands import analysis as analyse
from rlvr_scaling.commands import publish, stage
from rlvr_scaling.errors import StudyError


def _study_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=str(paths.DEFAULT_CONFIG), help="study file (default: %(default)s)")
    parser.add_argument("--site", default=None, help="site name in config/sites/ (default: the config's site)")
    parser.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="override a dotted config key"
    )
    parser.add_argument("--root", default=".", help="working directory holding results/ (default: .)")


def _peak(text: str) -> float | str | None:
    """A site's BF16 peak per GPU in TFLOP/s; `none`; `spec`: the run's spec.json's."""
    if text in ("none", "spec"):
        return None if text == "none" else text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive finite number, none or spec")
    return value


def _command(sub: Any, name: str, func: Callable[[argparse.Namespace], int], text: str, study: bool = True) -> Any:
    command = sub.add_parser(name, help=text)
    if study:
        _study_args(command)
    command.set_defaults(func=func)
    return command


def _add_stage_commands(sub: Any) -> None:
    plan = _command(sub, "plan", stage.cmd_plan, "print every run of the study")
    plan.add_argument("--json", action="store_true", help="print the plan as a JSON list")
    plan.add_argument(
        "--nodes",
        default=None,
        help="e.g. 32,64: predict step time, efficiency and cost there from the measured series",
    )
    data = _command(sub, "data", stage.cmd_data, "prepare one dataset in verl's schema, with a manifest")
    data.add_argument("--dataset", required=True)
    data.add_argument("--output", required=True, help="directory for train.parquet, val.parquet, manifest.json")
    model = _command(sub, "model", stage.cmd_model, "download the study's model, or build the tiny local one")
    model.add_argument("--output", required=True)
    definition = _command(
        sub,
        "container-definition",
        stage.cmd_container_definition,
        "render the image recipe (definition or SquashFS script)",
    )
    definition.add_argument("--output", required=True)
    build = _command(
        sub,
        "container-build",
        stage.cmd_container_build,
        "build the site's image and record its digests and packages",
    )
    resolve = _command(
        sub,
        "resolve-check",
        stage.cmd_resolve_check,
        "resolve the image's install against the base's package set, without building (network: PyPI)",
    )
    resolve.add_argument(
        "--base-packages", default=None, help="the base's `pip list --format=freeze` (default: the site's)"
    )
    resolve.add_argument("--json", action="store_true", help="print the verdict as JSON")
    build.add_argument("--definition", required=True)
    build.add_argument("--image", required=True)
    build.add_argument("--record", required=True, help="JSON: image and base sha256, labels, in-image packages")
    settings = _command(sub, "step-settings", stage.cmd_step_settings, "write the study's settings a step reads")
    settings.add_argument("--step", required=True, help="preflight, summary, ..., dataset@<name>")
    settings.add_argument("--output", required=True, help="results/steps/<step>-<digest>.json")
    preflight = _command(sub, "preflight", stage.cmd_preflight, "check the engine stack on the site before any run")
    preflight.add_argument("--output", required=True, help="results/preflight/<site>.json")
    launch = _command(sub, "launch", stage.cmd_launch, "run one run of the plan into results/runs/<run_id>")
    launch.add_argument("run_id")
    launch.add_argument("--timeout", type=float, default=None, help="seconds before the run is stopped")


def _add_analysis_commands(sub: Any) -> None:
    metrics = _command(
        sub,
        "metrics",
        analyse.cmd_metrics,
        "per-step metrics and their summary from a JSONL or console log",
        study=False,
    )
    metrics.add_argument("file")
    metrics.add_argument("--n-gpus", type=int, default=1, help="GPUs of the run (throughput is per GPU)")
    metrics.add_argument("--warmup-steps", type=int, default=1, help="leading steps left out of the summary")
    metrics.add_argument(
        "--steps", type=int, default=None, help="steps the run was configured for (default: the last one logged)"
    )
    metrics.add_argument("--json", action="store_true")
    summarize = _command(
        sub, "summarize", analyse.cmd_summarize, "a run's summary with its validity checks", study=False
    )
    summarize.add_argument("run_dir")
    summarize.add_argument("--warmup-steps", type=int, help="leading steps left out (default: the run's spec)")
    summarize.add_argument(
        "--peak-tflops-bf16",
        type=_peak,
        default="spec",
        help="the site's, for MFU; none: no MFU (default: the run's spec)",
    )
    summarize.add_argument("--output", required=True)
    selection = _command(sub, "select", analyse.cmd_select, "choose the one-node workload from the sweep summaries")
    selection.add_argument("--dataset", required=True)
    selection.add_argument("--output", required=True)
    selection.add_argument("summaries", nargs="+")
    step = _command(
        sub,
        "sweep-step",
        analyse.cmd_sweep_step,
        "whether a sequential sweep goes on after the points measured",
    )
    step.add_argument("--dataset", required=True)
    step.add_argument("--output", required=True)
    step.add_argument("summaries", nargs="+")
    index = _command(sub, "index", analyse.cmd_index, "list a dataset's runs and summaries for the analysis")
    index.add_argument("--dataset", required=True)
    index.add_argument("--selection", default=None)
    index.add_argument("--output", required=True)
    index.add_argument("summaries", nargs="*")
    for name, func, text in (
        ("tables", analyse.cmd_tables, "the study's tables"),
        ("figures", analyse.cmd_figures, "the figures"),
    ):
        command = _command(sub, name, func, f"write {text} from the dataset indexes")
        command.add_argument("--output", required=True)
        command.add_argument("indexes", nargs="+")
    report = _command(sub, "report", publish.cmd_report, "write the study report")
    for option in ("--tables", "--figures", "--output"):
        report.add_argument(option, required=True)
    report.add_argument("indexes", nargs="+")


def _add_publish_commands(sub: Any) -> None:
    bundle = _command(sub, "bundle", publish.cmd_bundle, "pack the publication bundle")
    bundle.add_argument("--output", required=True, help="directory for <study>-<site>-<date>.tar.gz")
    for option in ("--report", "--tables", "--figures"):
        bundle.add_argument(option, required=True)
    bundle.add_argument("indexes", nargs="+")
    bundle.add_argument("--sign", default=None, help="an SSH private key: writes <bundle>.sig (ssh-keygen -Y sign)")
    sign = _command(sub, "sign", publish.cmd_sign, "sign a bundle with an SSH key: <bundle>.sig", False)
    sign.add_argument("bundle", help="<study>-<site>-<date>.tar.gz")
    sign.add_argument("--key", required=True, help="the SSH private key to sign with")
    compare = _command(sub, "compare", publish.cmd_compare, "two studies side by side, a verdict per point", False)
    compare.add_argument("a", help="study A: a bundle (.tar.gz) or a study folder (holding results/index/)")
    compare.add_argument("b", help="study B, compared with A")
    compare.add_argument("--output", default=None, help="folder for compare.csv/.md/.tex, compare.png, compare.txt")
    compare.add_argument("--force", action="store_true", help="compare studies of another model or workload too")
    compare.add_argument(
        "--margin",
        type=float,
        default=0.05,
        help="equivalence margin: 'same' only when B/A's whole interval lies within 1 +- this (default 0.05)",
    )
    compare.add_argument("--json", action="store_true", help="print rows, differences and summary as JSON")
    history = _command(sub, "history", publish.cmd_history, "the finished studies, and what moved between them", False)
    history.add_argument("--root", default=".", help="the workflow's working directory (default: .)")
    history.add_argument("--json", action="store_true")
    spent = _command(
        sub, "time-spent", publish.cmd_time_spent, "where a study's time went (make demo prints it)", False
    )
    spent.add_argument("timeline", help="'<phase> <epoch seconds>' lines, in order (make demo writes them)")
    spent.add_argument("--root", default=".", help="the workflow's working directory (default: .)")
    verify = _command(sub, "verify", publish.cmd_verify, "check a bundle offline: checksums, then every number", False)
    verify.add_argument("bundle", help="<study>-<site>-<date>.tar.gz")
    verify.add_argument(
        "--allowed-signers", default=None, help="OpenSSH allowed_signers file: <bundle>.sig must be by one of them"
    )
    imported = _command(sub, "import", analyse.cmd_import, "a verl run made elsewhere as a run directory")
    imported.add_argument("log", help="the run's console log or file-logger JSONL")
    imported.add_argument("--dataset", required=True)
    for option in ("--nodes", "--gpus-per-node", "--prompts", "--max-response-length"):
        imported.add_argument(option, type=int, required=True)
    imported.add_argument("--steps", type=int, default=None, help="steps the run was set to (default: the study's)")
    imported.add_argument("--series", action="append", choices=["sweep", "weak", "strong"], help="repeatable")
    imported.add_argument("--site-name", default="imported", help="where it ran (default: %(default)s)")
    imported.add_argument("--gpu-memory-gb", type=float, default=None, help="default: the --site's")
    imported.add_argument("--rollout-tensor-parallel", type=int, default=None, help="default: the study's")
    imported.add_argument("--concurrency", type=int, default=None, help="vLLM max_num_seqs per engine")
    imported.add_argument(
        "--model-config", default=None, help="the trained model's config.json, for MFU (default: the study's model's)"
    )
    status = _command(
        sub,
        "status",
        stage.cmd_status,
        "every run and output: complete, stale, failed, missing, pending",
        False,
    )
    status.add_argument("--configfile", nargs="*", default=[], help="as given to snakemake, merged over the config")
    status.add_argument("--site", default=None, help="as snakemake --config site=... (default: the config's site)")
    status.add_argument("--root", default=".", help="the workflow's working directory (default: .)")
    status.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr-scaling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_stage_commands(sub)
    _add_analysis_commands(sub)
    _add_publish_commands(sub)
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
