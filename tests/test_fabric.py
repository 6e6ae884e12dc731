"""Across nodes: which transport a run's collectives used, read from the library's own lines, judged
against the site's `fabric`, on job.json and in the summary; the preflight collective's verdict and
its bus bandwidth. The lines below are the format strings of ROCm/rccl (src/init.cc,
src/transport/net_socket.cc, net_ib.cc) and aws-ofi-nccl 1.20.0 (src/nccl_ofi_net.cpp) as printed.

The preflight collective runs for real on the local site in the demo (test_local_study reads its
record) and through the Slurm cluster's one-step launcher with Gloo (test_slurm, test_apptainer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rlvr_scaling.analysis.per_run.summary import summarize_run, transport_check
from rlvr_scaling.engines import fabric
from rlvr_scaling.execution.fabric_record import transport_record
from rlvr_scaling.execution.preflight.collective import bus_bandwidth_gb_per_s, judge
from rlvr_scaling.study.config import load_study

from .study_runs import lumi_run_folder

CXI = [
    "nid005001:1234:1234 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.20.0",
    "nid005001:1234:1234 [0] NCCL INFO NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)",
    "nid005001:1234:1234 [0] NCCL INFO Using network Libfabric",
]
SOCKET_FALLBACK = [
    "nid005002:99:99 [0] NCCL INFO NET/OFI aws-ofi-nccl initialization failed",
    "nid005002:99:99 [0] NCCL INFO NET/Socket : Using [0]hsn0:10.253.1.2<0> [1]hsn1:10.253.1.3<0>",
    "nid005002:99:99 [0] NCCL INFO Using network Socket",
]
IB = [
    "gpu01:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
    "gpu01:7:7 [0] NCCL INFO Using network IB",
]


@pytest.mark.parametrize(
    ("lines", "transport", "shown"),
    [
        (CXI, "ofi-cxi", "Selected provider is cxi"),
        (SOCKET_FALLBACK, "socket", "Using network Socket"),
        (IB, "ib", "Using network IB"),
        # An older plugin calls itself "AWS Libfabric"; the provider line decides all the same.
        ([CXI[1], "x NCCL INFO Using network AWS Libfabric"], "ofi-cxi", "provider is cxi"),
        # No "Using network" line (output cut short): the transport's own start line.
        (SOCKET_FALLBACK[:2], "socket", "NET/Socket : Using"),
        (["x NCCL INFO Bootstrap : Using hsn0:10.253.1.2<0>"], None, None),  # bootstrap only: not the data path
    ],
    ids=["cxi", "socket-fallback", "ib", "aws-libfabric-name", "no-network-line", "bootstrap-only"],
)
def test_the_transport_is_the_one_the_library_names(lines: list[str], transport: str | None, shown: str | None) -> None:
    found, line = fabric.nccl_transport(lines)
    assert found == transport
    assert (line is None) if shown is None else (shown in line)


def test_a_multi_node_run_over_another_transport_is_invalid_in_one_line_naming_both() -> None:
    valid, detail = fabric.judge("ofi-cxi", {"nid005001": "ofi-cxi", "nid005002": "socket"}, nodes=2)
    assert not valid
    assert detail == (
        "collectives over socket on nid005002; the site expects ofi-cxi (fabric.transport): "
        "not a measurement of the site's scaling"
    )
    assert "\n" not in detail
    # A node that recorded nothing is named as such; so is a run with no record at all.
    valid, detail = fabric.judge("ofi-cxi", {"nid005001": "ofi-cxi", "nid005002": None}, nodes=2)
    assert not valid and "no transport recorded on nid005002" in detail
    assert fabric.judge("tcp", {}, nodes=2)[0] is False
    assert fabric.judge("ofi-cxi", {"nid005001": "ofi-cxi", "nid005002": "ofi-cxi"}, nodes=2)[0] is True
    # One node: the collectives stay within it, whatever network the library initialised.
    assert fabric.judge("ofi-cxi", {"nid005001": "socket"}, nodes=1)[0] is True


# What the engine hooks record of a rank's Slingshot variables on LUMI, as Slurm's hpe_slingshot plugin
# sets them for a step's tasks (one VNI, a CXI service per NIC, the node's four NICs, traffic classes).
STEP_CREDENTIALS = {"vnis": "1254", "svc_ids": "7,8,9,10", "devices": "cxi0,cxi1,cxi2,cxi3", "tcs": "0xa"}


def _plant(
    record_dir: Path, node: str, host: str, pid: int, lines: list[str], slingshot: dict | None = STEP_CREDENTIALS
) -> None:
    record_dir.mkdir(parents=True, exist_ok=True)
    (record_dir / f"nccl-{host}-{pid}.log").write_text("\n".join(lines) + "\n")
    event = {"event": "collectives", "host": host, "pid": pid, "node": node, "backend": "cpu:gloo,cuda:nccl"}
    if slingshot is not None:
        event["slingshot"] = slingshot
    with (record_dir / f"{host}-{pid}.jsonl").open("a") as handle:
        handle.write(json.dumps(event) + "\n")


def _planted_record(record_dir: Path, processes: dict[tuple[str, int], list[str]]) -> dict:
    """job.json's fabric for a LUMI two-node run whose processes (node, pid) printed these lines."""
    for (node, pid), lines in processes.items():
        _plant(record_dir, node, node, pid, lines)
    return transport_record(load_study(site="lumi"), 2, record_dir, ["nid005001", "nid005002"])


def test_job_json_names_each_nodes_transport_from_its_processes_files(tmp_path: Path) -> None:
    record = _planted_record(
        tmp_path, {("nid005001", 11): CXI, ("nid005001", 12): CXI, ("nid005002", 21): SOCKET_FALLBACK}
    )
    assert record["expected"] == {"library": "rccl", "transport": "ofi-cxi"}
    assert record["nodes"]["nid005001"]["transport"] == "ofi-cxi" and record["nodes"]["nid005001"]["processes"] == 2
    assert record["nodes"]["nid005002"]["transport"] == "socket"
    assert "Using network Socket" in record["nodes"]["nid005002"]["evidence"]
    assert record["valid_for_scaling"] is False and "socket on nid005002" in record["detail"]
    # A node of the job whose processes wrote nothing is on the record as such.
    shutil.rmtree(tmp_path)
    record = _planted_record(tmp_path, {("nid005001", 11): CXI})
    assert record["nodes"]["nid005002"] == {"transport": None, "processes": 0, "evidence": None, "slingshot": None}
    assert record["valid_for_scaling"] is False


def test_job_json_records_each_nodes_slingshot_credentials_and_a_node_without_a_vni_is_invalid(
    tmp_path: Path,
) -> None:
    record = _planted_record(tmp_path, {("nid005001", 11): CXI, ("nid005001", 12): CXI, ("nid005002", 21): CXI})
    assert record["valid_for_scaling"] is True, record["detail"]
    assert record["nodes"]["nid005002"]["slingshot"] == {
        "ranks": 1,
        "ranks_without_vni": 0,
        "vnis": ["1254"],
        "svc_ids": ["7,8,9,10"],
        "devices": ["cxi0,cxi1,cxi2,cxi3"],
        "tcs": ["0xa"],
    }
    # One rank of nid005001 started without the step's variables (as inside an image that drops them):
    # the run went over cxi all the same, but not provably on the step's VNI.
    shutil.rmtree(tmp_path)
    for pid, credentials in ((11, STEP_CREDENTIALS), (12, {})):
        _plant(tmp_path, "nid005001", "nid005001", pid, CXI, slingshot=credentials)
    _plant(tmp_path, "nid005002", "nid005002", 21, CXI)
    record = transport_record(load_study(site="lumi"), 2, tmp_path, ["nid005001", "nid005002"])
    assert record["nodes"]["nid005001"]["slingshot"]["ranks_without_vni"] == 1
    assert record["valid_for_scaling"] is False
    assert record["detail"] == (
        "no Slingshot VNI recorded on nid005001 (SLINGSHOT_VNIS not in its ranks' environment: libfabric's "
        "cxi provider then takes any CXI service of the user's, not the step's): not a measurement of the "
        "site's scaling"
    )
    # Beside a wrong transport, both are said in the one line.
    shutil.rmtree(tmp_path)
    _plant(tmp_path, "nid005001", "nid005001", 11, CXI, slingshot={})
    _plant(tmp_path, "nid005002", "nid005002", 21, SOCKET_FALLBACK)
    detail = transport_record(load_study(site="lumi"), 2, tmp_path, ["nid005001", "nid005002"])["detail"]
    assert "socket on nid005002" in detail and "no Slingshot VNI recorded on nid005001" in detail
    assert "\n" not in detail
    # Only a multi-node run on a Slingshot site is judged on them: within a node, and over TCP, none apply.
    assert fabric.judge_credentials("ofi-cxi", {"nid005001": []}, nodes=1) == (True, "")
    assert fabric.judge_credentials("tcp", {"n1": [], "n2": []}, nodes=2) == (True, "")


def test_the_image_receives_the_steps_slingshot_variables() -> None:
    from rlvr_scaling.inputs.container import passed_variables

    names = passed_variables(load_study(site="lumi"))[1]
    assert {"SLINGSHOT_VNIS", "SLINGSHOT_SVC_IDS", "SLINGSHOT_DEVICES", "SLINGSHOT_TCS"} <= set(names)


def test_a_node_with_processes_on_two_transports_is_not_taken_for_the_fabric(tmp_path: Path) -> None:
    record = _planted_record(
        tmp_path, {("nid005001", 11): CXI, ("nid005001", 12): SOCKET_FALLBACK, ("nid005002", 21): CXI}
    )
    assert record["nodes"]["nid005001"]["transport"] == "ofi-cxi+socket"
    assert record["valid_for_scaling"] is False


def test_gloo_is_recorded_from_the_connections_its_group_opened(tmp_path: Path) -> None:
    local = load_study()
    for node, pid in (("group-0", 1), ("group-1", 2)):
        gloo = fabric.gloo_transport(set(), {("192.0.2.2:4000", f"192.0.2.2:{4000 + pid}")})
        event = {"event": "collectives", "host": "vm", "pid": pid, "node": node, "backend": "gloo", "gloo": gloo}
        (tmp_path / f"vm-{pid}.jsonl").write_text(json.dumps(event) + "\n")
    record = transport_record(local, 2, tmp_path)
    assert {n: r["transport"] for n, r in record["nodes"].items()} == {"group-0": "tcp", "group-1": "tcp"}
    assert "local 192.0.2.2" in record["nodes"]["group-0"]["evidence"]
    assert record["valid_for_scaling"] is True


def test_this_processes_tcp_connections_are_read_from_proc() -> None:
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        before = fabric.tcp_connections()
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        try:
            opened = fabric.tcp_connections() - before
            port = server.getsockname()[1]
            # Both ends are this process's: the client's and the accepted one.
            assert (client.getsockname()[0] + f":{client.getsockname()[1]}", f"127.0.0.1:{port}") in opened
            assert len(opened) == 2
        finally:
            client.close()
            accepted.close()


@pytest.fixture(scope="module")
def two_node_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LUMI two-node run's folder as the launcher leaves it, without a fabric record (as before it)."""
    return lumi_run_folder(tmp_path_factory.mktemp("two-node"), lambda run: run.nodes == 2)


def test_a_run_over_sockets_never_counts_as_a_measurement() -> None:
    record = {
        "expected": {"library": "rccl", "transport": "ofi-cxi"},
        "nodes": {"nid005001": {"transport": "ofi-cxi"}, "nid005002": {"transport": "socket"}},
        # What the launcher concluded is not trusted: the summary judges the recorded transports again.
        "valid_for_scaling": True,
    }
    check = transport_check({"nodes": 2}, {"fabric": record})
    assert check is not None and check.name == "fabric" and not check.passed
    assert "socket on nid005002" in check.detail and "ofi-cxi" in check.detail
    record["nodes"]["nid005002"]["transport"] = "ofi-cxi"
    assert transport_check({"nodes": 2}, {"fabric": record}).passed
    # A run whose launcher recorded no fabric (imported, or older) is not judged on it.
    assert transport_check({"nodes": 2}, {}) is None


def test_the_summary_of_a_two_node_run_over_sockets_is_invalid(two_node_run: Path, tmp_path: Path) -> None:
    two = tmp_path / two_node_run.name
    shutil.copytree(two_node_run, two)
    assert summarize_run(two).valid  # the fabricated run as it is: no fabric on record
    job = json.loads((two / "job.json").read_text())
    job["fabric"] = {
        "expected": {"library": "rccl", "transport": "ofi-cxi"},
        "nodes": {"a": {"transport": "ofi-cxi"}, "b": {"transport": "socket"}},
    }
    (two / "job.json").write_text(json.dumps(job))
    summary = summarize_run(two)
    assert not summary.valid
    [failed] = [c for c in summary.checks if not c.passed]
    assert failed.name == "fabric" and "socket on b" in failed.detail


def test_bus_bandwidth_counts_the_slowest_rank_and_the_median_iteration() -> None:
    # 4 ranks, 1e9 bytes; per iteration the slowest rank: 0.5, 1.0, 0.25 s -> median 0.5 s.
    seconds = [[0.5, 0.2, 0.25], [0.1, 1.0, 0.1], [0.3, 0.3, 0.2], [0.4, 0.4, 0.1]]
    expected = 1e9 / 0.5 * 2 * 3 / 4 / 1e9  # 3.0 GB/s, as rccl-tests count an all-reduce's bus bandwidth
    assert bus_bandwidth_gb_per_s(int(1e9), 4, seconds) == pytest.approx(expected) == pytest.approx(3.0)
    assert bus_bandwidth_gb_per_s(int(1e9), 2, [[0.0], [0.0]]) is None


def _collective(transport: str, bandwidth: float | None, finished: bool = True) -> dict:
    return {
        "nodes": ["nid005001", "nid005002"],
        "finished": finished,
        "stage": "the ranks' collectives",
        "log_dir": "/scratch/x/results/preflight/collective",
        "sums_right": True,
        "bus_bandwidth_gb_per_s": bandwidth,
        "transport": {
            "valid_for_scaling": transport == "ofi-cxi",
            "detail": fabric.judge("ofi-cxi", {"nid005001": "ofi-cxi", "nid005002": transport}, 2)[1],
        },
    }


def test_the_preflight_collective_fails_in_one_line_for_each_reason() -> None:
    lumi = load_study(site="lumi")
    assert judge(lumi, _collective("ofi-cxi", 88.0)) == []
    # LUMI's floor is half the 100 GB/s its four 200 Gb/s NICs give: exactly 50 passes, just under
    # does not, and one NIC's 25 GB/s (or a host-staged path) fails naming both figures and the source.
    assert lumi.site.fabric.floor_gb_per_s == 0.5 * 4 * 200 / 8 == 50
    assert judge(lumi, _collective("ofi-cxi", 50.0)) == []
    [under] = judge(lumi, _collective("ofi-cxi", 49.99))
    assert under == (
        "the all-reduce's bus bandwidth across nodes nid005001, nid005002 is 49.99 GB/s, under the site's floor "
        "of 50 GB/s (0.5 x the 100 GB/s the site expects: fabric.bandwidth_floor_share, "
        "fabric.expected_bus_bandwidth_gb_per_s; LUMI docs, 'LUMI-G hardware' / 'Network and interconnect': "
        "4 HPE Slingshot-11 NICs of 200 Gb/s per node)"
    )
    assert judge(lumi, _collective("ofi-cxi", 25.0))[0].startswith(
        "the all-reduce's bus bandwidth across nodes nid005001, nid005002 is 25 GB/s, under"
    )
    [wrong] = judge(lumi, _collective("socket", 88.0))
    assert wrong == (
        "the all-reduce across nodes nid005001, nid005002: collectives over socket on nid005002; the site "
        "expects ofi-cxi (fabric.transport): not a measurement of the site's scaling"
    )
    # A hang: the line names the stage the ranks behind stopped at, from what each rank noted last.
    hung_record = {
        **_collective("ofi-cxi", None, finished=False),
        "ranks": 16,
        "ranks_at": {
            **{rank: (7, "the first all-reduce on new process group 3 of 8") for rank in range(15)},
            15: (6, "new process group 3 of 8"),
        },
    }
    [hung] = judge(lumi, hung_record)
    assert hung == (
        "the all-reduce across nodes nid005001, nid005002 on 8 new process group(s) did not finish within 900 s "
        "(fabric.collective_timeout_seconds): rank(s) 15 stopped at new process group 3 of 8 (the other 15 "
        "rank(s) past it, waiting on them); the ranks' logs are in /scratch/x/results/preflight/collective"
    )
    # ... and says so when no rank got as far as noting a stage (the ranks never started).
    [early] = judge(lumi, _collective("ofi-cxi", None, finished=False))
    assert "stopped in the ranks' collectives, before any rank noted a stage" in early
    assert all("\n" not in line for line in (under, wrong, hung, early))


def test_the_bandwidth_floor_is_set_one_way_and_an_expected_figure_names_its_source() -> None:
    import dataclasses

    from rlvr_scaling.errors import ConfigError
    from rlvr_scaling.study.validate import check_semantics

    study = load_study(site="lumi")
    fabric_section = study.site.fabric
    cases = [
        (
            {"expected_bus_bandwidth_gb_per_s": None},
            "'fabric.bandwidth_floor_share'",
            "a share of fabric.expected_bus_bandwidth_gb_per_s, which the site does not set",
        ),
        ({"bandwidth_floor_gb_per_s": 20.0}, "'fabric.bandwidth_floor_gb_per_s'", "the floor is set one way"),
        ({"expected_source": ""}, "'fabric.expected_source'", "where fabric.expected_bus_bandwidth_gb_per_s comes"),
    ]
    for change, key, expected in cases:
        site = dataclasses.replace(study.site, fabric=dataclasses.replace(fabric_section, **change))
        with pytest.raises(ConfigError) as caught:
            check_semantics(study.config, site)
        assert key in str(caught.value) and expected in str(caught.value), str(caught.value)
    # An absolute floor alone is a floor of its own.
    absolute = dataclasses.replace(
        fabric_section, expected_bus_bandwidth_gb_per_s=None, bandwidth_floor_share=None, bandwidth_floor_gb_per_s=20.0
    )
    assert absolute.floor_gb_per_s == 20.0 and absolute.floor_text() == "20 GB/s (fabric.bandwidth_floor_gb_per_s)"


def test_a_nccl_site_that_sets_nccl_debug_itself_is_refused_naming_the_key() -> None:
    """Its own NCCL_DEBUG would silence the output the transport's record is read from."""
    import dataclasses

    from rlvr_scaling.errors import ConfigError
    from rlvr_scaling.study.validate import check_semantics

    study = load_study(site="nvidia-example")
    check_semantics(study.config, study.site)  # as shipped: no NCCL_DEBUG of its own
    quiet = dataclasses.replace(study.site, environment={**study.site.environment, "NCCL_DEBUG": "WARN"})
    with pytest.raises(ConfigError) as caught:
        check_semantics(study.config, quiet)
    message = str(caught.value)
    assert "'environment.NCCL_DEBUG'" in message and "'WARN'" in message and "the launcher sets NCCL_DEBUG" in message
    # A Gloo site's own NCCL_DEBUG concerns no record of ours.
    local = load_study()
    check_semantics(local.config, dataclasses.replace(local.site, environment={"NCCL_DEBUG": "WARN"}))
