"""The LUMI image's base release: the one docs/lumi.md's known issues speak of is the one the site pins,
the site sets the workaround those issues name and not what they say hangs, and `plan` prints the
release with its known issues (docs/lumi.md, "Known issues on this stack")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from rlvr_scaling.study.config import load_study

DOCS = Path(__file__).resolve().parents[1] / "docs" / "lumi.md"


def known_issues_section() -> str:
    text = DOCS.read_text()
    return text.split("## Known issues on this stack", 1)[1].split("\n## ", 1)[0]


def test_the_release_the_known_issues_name_is_the_one_pinned_with_its_workaround() -> None:
    site = load_study(site="lumi").site
    assert site.container is not None
    pinned = re.search(r"u24r\d+f\d+m\d+t\d+-\d{8}_\d{6}", site.container.base_image)
    assert pinned, site.container.base_image
    section = known_issues_section()
    hang = next(item for item in section.split("\n- ") if "multi-node hang" in item)
    named = re.findall(r"release `(u24r\d+f\d+m\d+t\d+-\d{8}_\d{6})`", hang)
    assert named == [pinned.group(0)], (named, pinned.group(0))
    assert "`FI_MR_CACHE_MONITOR=userfaultfd`" in hang and "`NCCL_NET_GDR_LEVEL=PHB`" in hang
    assert site.environment.get("FI_MR_CACHE_MONITOR") == "userfaultfd"
    assert "NCCL_NET_GDR_LEVEL" not in site.environment
    assert "issue 44" in (site.container.known_issues or "")


def test_plan_prints_the_release_with_its_known_issues() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling", "plan", "--site", "lumi"], capture_output=True, text=True, check=True
    ).stdout
    release = Path(load_study(site="lumi").site.container.base_image).name.removesuffix(".sif")  # type: ignore[union-attr]  # lumi has a container
    [line] = [line for line in shown.splitlines() if line.startswith("Image base:")]
    assert release in line and "known issues:" in line and "issue 44" in line
    assert "Collectives across nodes: rccl over ofi-cxi (every node's Ray in one job step)" in shown
