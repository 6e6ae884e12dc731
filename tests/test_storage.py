"""Where results live (storage.py): the site's storage.results or RLVR_RESULTS_ROOT, reached through a
results/ link made once; results already made are never left behind. The local study test runs a
whole study with its results outside the working directory (test_local_study.py)."""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.execution.storage import OVERRIDE, link_results, results_location, space_report
from rlvr_scaling.plan_view import results_line
from rlvr_scaling.study.config import Study, load_study

from .study_edits import edited


@pytest.fixture(autouse=True)
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (OVERRIDE, "RLVR_SLURM_ACCOUNT", "SLURM_ACCOUNT", "SBATCH_ACCOUNT"):
        monkeypatch.delenv(name, raising=False)


def lumi(account: str | None = "project_465000000", results: str | None = None) -> Study:
    study = edited(load_study(site="lumi"), config={"slurm_account": account})
    return study if results is None else edited(study, site={"storage": {"results": results}})


def test_lumi_keeps_results_on_the_projects_scratch() -> None:
    location, source = results_location(lumi())
    assert location == Path(f"/scratch/project_465000000/{getpass.getuser()}/rlvr-scaling/results")
    assert "storage.results" in source
    with pytest.raises(ConfigError, match=r"storage\.results.*RLVR_SLURM_ACCOUNT"):
        results_location(lumi(account=None))
    assert "not yet known ({account} needs the Slurm account" in results_line(lumi(account=None), Path("/c"))


def test_the_environment_overrides_the_site_and_dollar_names_are_filled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(OVERRIDE, str(tmp_path / "flash"))
    assert results_location(lumi()) == (tmp_path / "flash", OVERRIDE)
    monkeypatch.delenv(OVERRIDE)
    study = lumi(results="${RLVR_TEST_SCRATCH}/{user}/r")
    monkeypatch.setenv("RLVR_TEST_SCRATCH", str(tmp_path))
    assert results_location(study)[0] == tmp_path / getpass.getuser() / "r"
    monkeypatch.delenv("RLVR_TEST_SCRATCH")
    with pytest.raises(ConfigError, match=r"\$\{RLVR_TEST_SCRATCH\}, which the environment lacks"):
        results_location(study)
    for bad, expected in [("relative/results", "an absolute path"), ("/scratch/{project}", "only {account}")]:
        with pytest.raises(ConfigError, match=expected):
            results_location(lumi(results=bad))


def test_results_become_a_link_to_the_storage_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clone, scratch = tmp_path / "clone", tmp_path / "scratch" / "results"
    clone.mkdir()
    monkeypatch.setenv(OVERRIDE, str(scratch))
    study = load_study(site="local")
    assert link_results(study, clone) == scratch
    assert (clone / "results").is_symlink() and (clone / "results").resolve() == scratch.resolve()
    (clone / "results" / "runs").mkdir()
    assert link_results(study, clone) == scratch and (scratch / "runs").is_dir()  # again: nothing changes
    assert "links there" in results_line(study, clone) and str(scratch) in results_line(study, clone)
    # Without the setting later, the link stays what it is: results are not left behind.
    monkeypatch.delenv(OVERRIDE)
    assert link_results(study, clone) == scratch.resolve()
    # Another place while results are in the first: an error that says how to move them.
    monkeypatch.setenv(OVERRIDE, str(tmp_path / "elsewhere"))
    with pytest.raises(StudyError, match=r"results/ links to .*mv "):
        link_results(study, clone)
    assert not (tmp_path / "elsewhere").exists()


def test_results_already_in_the_clone_are_not_hidden_behind_a_link(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "results" / "runs").mkdir(parents=True)
    monkeypatch.setenv(OVERRIDE, str(tmp_path / "scratch"))
    with pytest.raises(StudyError, match=r"holds results.*move them there"):
        link_results(load_study(site="local"), tmp_path)
    assert (tmp_path / "results").is_dir() and not (tmp_path / "results").is_symlink()
    # An empty results/ (nothing made yet) simply becomes the link.
    (tmp_path / "results" / "runs").rmdir()
    link_results(load_study(site="local"), tmp_path)
    assert (tmp_path / "results").is_symlink()


def test_the_preflight_reports_room_and_an_unwritable_root(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\0" * 4096)
    facts, problems, warnings = space_report(tmp_path, model)
    assert problems == [] and facts["model_bytes"] == 4096 and facts["free_bytes"] > 0
    # The warning says when free space is under the model's size plus 10 GiB for the runs, and only then.
    low = facts["free_bytes"] < 4096 + 10 * 2**30
    assert len(warnings) == int(low) and all("GiB free" in w for w in warnings)
    # Unwritable even for root (CI runs as root): a results root that is not a directory.
    not_a_directory = tmp_path / "results-file"
    not_a_directory.write_text("")
    assert "not writable" in space_report(not_a_directory, model)[1][0]


def test_two_clones_do_not_share_one_results_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    first, second, scratch = tmp_path / "first", tmp_path / "second", tmp_path / "scratch"
    first.mkdir()
    second.mkdir()
    monkeypatch.setenv(OVERRIDE, str(scratch))
    study = load_study(site="local")
    link_results(study, first)
    with pytest.raises(StudyError, match=r"holds the results of the clone .*first.*two clones must not share"):
        link_results(study, second)
    assert not (second / "results").exists()
    # A clone that moved (its old place gone) hands the root to the one that uses it now.
    (first / "results").unlink()
    first.rmdir()
    assert link_results(study, second) == scratch and (scratch / ".clone").read_text().strip() == str(second)


def test_a_relative_override_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, "results-elsewhere")
    with pytest.raises(ConfigError, match="RLVR_RESULTS_ROOT.*absolute"):
        results_location(load_study(site="local"))
