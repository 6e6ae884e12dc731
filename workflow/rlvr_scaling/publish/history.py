"""The results store: every finished study (its bundle) appended to results/history.sqlite, one row
per run and per published number or relation, with the study's provenance; `rlvr-scaling history`
lists the studies and flags what moved beyond its tolerance since the last study of the same settings.

"The same settings": the same model, workloads, response caps, responses per prompt, site and GPUs
per node (publish.study_comparison's facts); the verl version and the image may differ, as they do
before and after an upgrade, which is what the history is for. A relation's tolerance is its
reference rule; a scaling point's mean step time moves when it changes by more than POINT_TOLERANCE.

A study's key is what it measured, not its bundle's bytes: its name and site, its settings (above), and
every run by id with the sha256 of its metrics file (study_key). One `make demo` packs the bundle
twice (before and after adding the Snakemake report), and a study may be packed again after a fix to
its report: neither measures anything new, so the entry is updated (when, which bundle, its verdicts
as made now), never doubled. A study whose runs or settings changed is a new entry; it says what
changed since the last entry of the same name and site (runs added, dropped or measured again, each
setting that differs).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.analysis.verdict.reproduction import judge_number
from rlvr_scaling.errors import StudyError
from rlvr_scaling.publish.study_comparison import DEFINING, study_facts

POINT_TOLERANCE = {"relative": 0.05}
SETTINGS = (*DEFINING, "site", "GPUs per node")
SCHEMA = """
create table if not exists studies (
  key text primary key, recorded text, name text, site text, settings_digest text, settings text,
  bundle text, provenance text, runs text, changes text, updated text);
create table if not exists runs (
  study_key text, run_id text, dataset text, series text, nodes integer, prompts integer,
  step_time_s real, throughput_per_gpu real, valid integer);
create table if not exists relations (
  study_key text, id text, kind text, dataset text, what text, nodes integer, measured text,
  published text, rule text, verdict text);
"""


def history_path(root: Path) -> Path:
    return paths.results_dir(root) / "history.sqlite"


# Columns added since the first stores were written: such a store gains them, empty for its old entries.
ADDED_COLUMNS = ("runs", "changes", "updated")


@contextmanager
def _database(path: Path) -> Iterator[sqlite3.Connection]:
    try:
        with closing(sqlite3.connect(path, timeout=60)) as db:
            db.executescript(SCHEMA)
            present = {row[1] for row in db.execute("pragma table_info(studies)")}
            for column in ADDED_COLUMNS:
                if column not in present:
                    db.execute(f"alter table studies add column {column} text")
            yield db
    except sqlite3.Error as error:
        raise StudyError(f"the results store {path}: {error}") from error


def measured_runs(results: StudyResults) -> dict[str, str | None]:
    """Every run of the study by id, with the sha256 of the metrics it was summarised from (None: a
    failed sweep point, which measured nothing)."""
    return {s.run_id: s.provenance.get("metrics_sha256") for s in sorted(results.summaries.values(), key=_run_id)}


def _run_id(summary: Any) -> str:
    return summary.run_id


def study_key(name: str | None, site: str | None, settings: dict[str, Any], runs: dict[str, str | None]) -> str:
    """The study's identity: what it measured, so that packing it again (another bundle of the same runs)
    is the same study, and measuring a run again is another."""
    identity = {"name": name, "site": site, "settings": settings, "runs": runs}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def changes_since(
    before_settings: dict[str, Any], before_runs: dict[str, Any], settings: dict[str, Any], runs: dict[str, Any]
) -> list[str]:
    """What differs from an earlier entry of the same study: runs, then settings, one line each."""
    found = []
    added = sorted(set(runs) - set(before_runs))
    dropped = sorted(set(before_runs) - set(runs))
    again = sorted(r for r in set(runs) & set(before_runs) if runs[r] != before_runs[r])
    for what, ids in (("run(s) added", added), ("run(s) no longer in it", dropped), ("run(s) measured again", again)):
        if ids:
            found.append(f"{len(ids)} {what}: {', '.join(ids)}")
    for name in sorted(set(settings) | set(before_settings)):
        if settings.get(name) != before_settings.get(name):
            found.append(f"{name}: {before_settings.get(name)!r} -> {settings.get(name)!r}")
    return found


def record_study(
    store: Path,
    root: Path,
    results: StudyResults,
    archive: Path,
    provenance: dict[str, Any],
    verdicts: list[dict[str, Any]],
    rules: dict[str, dict[str, float]],
    recorded: str,
) -> str:
    """Record the study of `root` in `store` (one transaction: all of it or nothing); its key (study_key).
    Recorded before: its entry is updated. `rules`: each verdict's tolerance rule by id."""
    facts = study_facts(results, root)
    settings = {name: facts[name] for name in SETTINGS}
    settings = json.loads(json.dumps(settings, default=str))  # as the store gives it back
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()
    name, site = provenance.get("study"), provenance.get("site")
    runs = measured_runs(results)
    key = study_key(name, site, settings, runs)
    store.parent.mkdir(parents=True, exist_ok=True)
    with _database(store) as db, db:
        if db.execute("select 1 from studies where key = ?", (key,)).fetchone():
            # The same study packed again: its entry says when and in which bundle, with today's verdicts.
            db.execute(
                "update studies set updated = ?, bundle = ?, provenance = ? where key = ?",
                (recorded, archive.name, json.dumps(provenance, default=str), key),
            )
            db.execute("delete from runs where study_key = ?", (key,))
            db.execute("delete from relations where study_key = ?", (key,))
        else:
            previous = db.execute(
                "select settings, runs from studies where name is ? and site is ? and runs is not null "
                "order by recorded desc, rowid desc limit 1",
                (name, site),
            ).fetchone()
            changes = (
                changes_since(json.loads(previous[0]), json.loads(previous[1]), settings, runs) if previous else None
            )
            db.execute(
                "insert into studies (key, recorded, name, site, settings_digest, settings, bundle, provenance, runs, "
                "changes) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, recorded, name, site, digest, json.dumps(settings, default=str), archive.name,
                 json.dumps(provenance, default=str), json.dumps(runs), json.dumps(changes)),
            )  # fmt: skip
        for s in results.summaries.values():
            for series in s.series or ["-"]:
                db.execute(
                    "insert into runs values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (key, s.run_id, s.dataset, series, s.nodes, s.prompts,
                     s.measured.step_time_s.mean if s.measured else None,
                     s.measured.throughput_per_gpu.mean if s.measured else None, int(s.valid)),
                )  # fmt: skip
        for row in verdicts:
            db.execute(
                "insert into relations values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, row["id"], row["kind"], row["dataset"], row["what"], row["nodes"],
                 json.dumps(row["measured"]), json.dumps(row["published"]), json.dumps(rules.get(row["id"])),
                 row["verdict"]),
            )  # fmt: skip
    return key


def _moved(before: Any, after: Any, rule: dict[str, float] | None) -> str | None:
    """How `after` moved from `before` beyond the rule, or None."""
    if _no_value(before) and _no_value(after):
        return None  # not measured either time
    if isinstance(before, int | float) and isinstance(after, int | float):
        from rlvr_scaling.analysis.verdict.reproduction import Measurement

        rule = rule or POINT_TOLERANCE
        if "interval_factor" in rule:  # no interval is stored: a relation's own rule cannot apply
            rule = POINT_TOLERANCE
        verdict, why = judge_number(Measurement(after, ()), before, rule)
        return None if verdict == "reproduced" else f"{before:.4g} -> {after:.4g} ({why})"
    return None if before == after else f"{before!r} -> {after!r}"


def _no_value(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def study_history(store: Path) -> list[dict[str, Any]]:
    """Every study in the store, oldest first, each with what moved since the last of its settings."""
    if not store.is_file():
        return []
    with _database(store) as db:
        studies = db.execute(
            "select key, recorded, name, site, settings_digest, bundle, provenance, changes, updated from studies "
            "order by recorded, rowid"
        ).fetchall()
        listed: list[dict[str, Any]] = []
        last_of: dict[str, dict[str, Any]] = {}
        for key, recorded, name, site, digest, bundle, provenance, changes, updated in studies:
            relations = {
                r[0]: (json.loads(r[1]), json.loads(r[2]), r[3])
                for r in db.execute("select id, measured, rule, verdict from relations where study_key = ?", (key,))
            }
            points = {
                f"{d} {s} {n} node(s) step time": (t, None, None)
                for d, s, n, t in db.execute(
                    "select dataset, series, nodes, step_time_s from runs where study_key = ? and valid = 1 "
                    "and series in ('weak', 'strong')",
                    (key,),
                )
            }
            entry = {
                "key": key,
                "recorded": recorded,
                "recorded_again": updated,  # the last time the same study was recorded again, unchanged
                "name": name,
                "site": site,
                "settings_digest": digest,
                "bundle": bundle,
                "verl": json.loads(provenance).get("runs_measured_with", {}).get("verl"),
                "runs": len(points),
                "verdicts": {v: sum(r[2] == v for r in relations.values()) for v in {r[2] for r in relations.values()}},
                "since": None,
                "moved": [],
                # what changed since the last entry of its name and site; None: its first entry (or an
                # entry recorded before the store kept its runs)
                "changes": json.loads(changes) if changes else None,
            }
            previous = last_of.get(digest)
            if previous is not None:
                entry["since"] = previous["key"]
                now = {**relations, **points}
                for name_ in sorted(set(now) | set(previous["values"])):
                    before, after = previous["values"].get(name_), now.get(name_)
                    if after is None:
                        entry["moved"].append(f"{name_}: {before[0]!r} -> not in this study (missing or invalid)")
                    elif before is not None and (change := _moved(before[0], after[0], after[1])):
                        entry["moved"].append(f"{name_}: {change}")
            last_of[digest] = {"key": key, "values": {**relations, **points}}
            listed.append(entry)
    return listed
