"""One Ray cluster over a Slurm allocation: every node's Ray (the head on the first node, where the
launcher runs, and a worker on each other node) started as the tasks of ONE job step, inside the
site's container when it has one.

One step, not the batch step plus a step per node: on Slingshot only a multi-node srun step gets a
network identifier (VNI) and CXI service, each such step its own, and libfabric's cxi provider uses
only the step's (Slurm's hpe_slingshot switch plugin; libfabric's prov/cxi; docs/lumi.md, "Collectives
across nodes"). verl's GPU workers are Ray's processes, children of each node's raylet: in one step
they all share its VNI, so RCCL can reach Slingshot instead of falling back to TCP sockets."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from rlvr_scaling.engines.fabric import NODE_RESOURCE, NODE_VAR
from rlvr_scaling.errors import StudyError

# Ray 2.60 drains a node for up to 30 s when its Ray gets SIGTERM, for Ray Serve's proxies to let go
# (RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S; 0 turns it off). A training run has nothing to drain, and a
# run ended by a signal (its time limit, scancel, the hang guard, an adaptive stop) was filed 30 s
# late: the launcher waits 20 s for the Ray step, then 10 s for the run's processes.
RAY_TEARDOWN_ENV = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}

PROBE = """
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n["Alive"]]
print(json.dumps({"resources": [n["Resources"] for n in alive], "addresses": [n["NodeManagerAddress"] for n in alive]}))
"""

# Runs in the run's Python on every node (inside the image; nothing of this package is importable
# there), before `ray start`: the node's address on the site's network interface, and a check that the
# job step may use the CPUs Ray will be told it has.
NODE_START = r"""
import fcntl, json, os, socket, struct, sys, time
mode, interface, cpus, *ray_args = sys.argv[1:]
node = socket.gethostname()
if mode == "step":  # one task of the step that starts every node's Ray: this node's part of the plan
    plan = json.loads(ray_args[0])
    node = os.environ.get("SLURMD_NODENAME", "")
    if node not in plan["nodes"]:
        sys.exit(f"rlvr-scaling: this task's node {node!r} (SLURMD_NODENAME) is not one of {sorted(plan['nodes'])}")
    mine = plan["nodes"][node]
    log = os.open(mine["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for name in plan["unset"]:  # srun gives each step Slurm's device variables again: Ray owns them
        os.environ.pop(name, None)
    os.environ[plan["node_var"]] = node  # Ray's processes inherit it: their records name the node
    head = mine.get("head_address")
    deadline = time.monotonic() + float(plan["wait_seconds"])
    while head:  # a worker joins once the head's port answers
        try:
            socket.create_connection(tuple(head.rsplit(":", 1)), timeout=5).close()
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                sys.exit(f"rlvr-scaling: node {node}: the Ray head {head} did not answer "
                         f"within {plan['wait_seconds']} s: {exc}")
            time.sleep(1)
    ray_args = mine["args"]

def interface_address():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            request = struct.pack("256s", interface.encode()[:15])
            return socket.inet_ntoa(fcntl.ioctl(sock.fileno(), 0x8915, request)[20:24])  # SIOCGIFADDR
        except OSError as exc:
            sys.exit(f"rlvr-scaling: node {node}: network interface {interface!r} (launch.node_interface) "
                     f"has no IPv4 address here ({exc.strerror}); interfaces: {[n for _, n in socket.if_nameindex()]}")

if mode == "address":
    if interface:
        print(interface_address())
    else:
        from ray._private.services import get_node_ip_address
        print(get_node_ip_address())
    sys.exit(0)
usable = sorted(os.sched_getaffinity(0))
def core(cpu):  # two hardware threads of one core count once
    try:
        top = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        return open(top + "physical_package_id").read().strip(), open(top + "core_id").read().strip()
    except OSError:
        return cpu
cores = len({core(cpu) for cpu in usable})
if cores < int(cpus):
    sys.exit(f"rlvr-scaling: node {node}: Ray's processes here may run on {cores} cores (CPUs {usable}), but the "
             f"site has {cpus} per node (hardware.cpus_per_node): the job step's CPU binding is too narrow")
if interface:
    ray_args.append(f"--node-ip-address={interface_address()}")
os.execv(sys.executable, [sys.executable, "-m", "ray.scripts.scripts", *ray_args])
"""


def local_node_ip(python: list[str], env: dict[str, str], interface: str | None = None) -> str:
    """This node's address for Ray: the site's network interface's (LUMI: hsn0, the Slingshot network
    that RCCL uses too), else the address Ray itself picks (each node picks its own the same way;
    Slurm's NodeAddr may be a name or a loopback address Ray does not serve on). Asked of the run's
    Python: the workflow's own environment need not have Ray, nor the same one."""
    command = [*python, "-c", NODE_START, "address", interface or "", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise StudyError(
            f"the run's Python ({' '.join(python)}) could not name this node's address for Ray "
            f"(exit {result.returncode}): {result.stderr.strip()[-1500:]}"
        )
    return lines[-1].strip()


class RayClusterError(StudyError):
    """The Ray cluster did not form; the message names what is missing."""


@dataclass
class RayCluster:
    job_id: str
    nodes: list[str]
    head_ip: str
    port: int
    gpus_per_node: int
    cpus_per_node: int
    slurm_cpus_per_node: int
    object_store_bytes: int | None
    python: list[str]
    env: dict[str, str]
    unset_environment: list[str]
    log_dir: Path
    interface: str | None = None
    # Ray's sessions, sockets and logs on each node: node-local and this cluster's own (Ray's default
    # /tmp/ray, on a node shared between users, may be another user's: Ray issues 3899, 4593, 20634).
    temp_dir: str | None = None
    # The site's per-job folders on each node (run_environment.job_folders), removed with Ray's.
    job_folders: list[str] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)
    # Each node's address as Ray registered it, once the cluster has formed.
    addresses: dict[str, str] = field(default_factory=dict)

    @property
    def head_address(self) -> str:
        return f"{self.head_ip}:{self.port}"

    def _ray_args(self, index: int) -> list[str]:
        """Ray's CLI arguments for node `index` (the head for 0)."""
        node = self.nodes[index]
        command = [
            "start",
            "--block",
            f"--num-gpus={self.gpus_per_node}",
            f"--num-cpus={self.cpus_per_node}",
            f"--resources={json.dumps({NODE_RESOURCE.format(node): 1})}",
            "--disable-usage-stats",
        ]
        if self.temp_dir:
            command.append(f"--temp-dir={self.temp_dir}")
        if self.object_store_bytes:
            command.append(f"--object-store-memory={self.object_store_bytes}")
        if index == 0:
            # Several heads can share a host (fake nodes, shared login nodes): no fixed side ports.
            command += [
                "--head",
                f"--port={self.port}",
                f"--ray-client-server-port={self.port + 1}",
                "--include-dashboard=false",
                "--dashboard-agent-listen-port=0",
            ]
        else:
            command += [f"--address={self.head_address}", "--dashboard-agent-listen-port=0"]
        return command

    def step_command(self, wait_seconds: float) -> list[str]:
        """The one job step over all nodes: on each, the run's Python (inside the site's container
        when it has one) runs NODE_START, which takes its node's part of the plan and becomes Ray's
        own CLI (no dependence on an activated environment or on PATH inside the image)."""
        plan = {
            "nodes": {
                node: {
                    "args": self._ray_args(index),
                    "log": str(self.log_dir / f"ray-{node}.log"),
                    "head_address": self.head_address if index else None,
                }
                for index, node in enumerate(self.nodes)
            },
            "unset": self.unset_environment,
            "node_var": NODE_VAR,
            "wait_seconds": wait_seconds,
        }
        count = len(self.nodes)
        return [
            # Explicit geometry: inside the job the executor stripped SLURM_*, so srun knows nothing.
            "srun",
            f"--jobid={self.job_id}",
            f"--nodes={count}",
            f"--ntasks={count}",
            "--ntasks-per-node=1",
            f"--nodelist={','.join(self.nodes)}",
            f"--cpus-per-task={self.slurm_cpus_per_node}",
            f"--gpus-per-node={self.gpus_per_node}",
            "--overlap",
            "--kill-on-bad-exit=0",
            *self.python,
            "-c",
            NODE_START,
            "step",
            self.interface or "",
            str(self.slurm_cpus_per_node),
            json.dumps(plan),
        ]

    def start(self, wait_seconds: float = 600.0) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # What srun and the container say before a node's task takes its own log.
        log = open(self.log_dir / "ray-step.log", "ab")
        command = self.step_command(wait_seconds)
        self.processes.append(
            subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        )

    def joined(self) -> tuple[list[str], float, str]:
        """Nodes whose raylet is alive, the GPUs they brought, and why the probe failed if it did.

        The probe is a Ray driver: it runs the run's Python (the container's on a container site), as
        Ray refuses a driver whose Python differs from the cluster's.
        """
        try:
            result = subprocess.run(
                [*self.python, "-c", PROBE, self.head_address],
                capture_output=True,
                text=True,
                timeout=60,
                env=self.env,
            )
        except subprocess.TimeoutExpired:
            return [], 0.0, "the probe did not answer within 60 s"
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines:
            return [], 0.0, f"the probe failed (exit {result.returncode}): {result.stderr.strip()[-800:]}"
        found = json.loads(lines[-1])
        resources = found["resources"]
        self.addresses = {
            n: address
            for n in self.nodes
            for r, address in zip(resources, found["addresses"], strict=True)
            if NODE_RESOURCE.format(n) in r
        }
        names = [n for n in self.nodes if n in self.addresses]
        return names, sum(r.get("GPU", 0.0) for r in resources), ""

    def wait(self, timeout_s: float, want_nodes: list[str] | None = None) -> None:
        want = want_nodes or self.nodes
        deadline = time.monotonic() + timeout_s
        joined: list[str] = []
        gpus = 0.0
        problem = ""
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    tails = "; ".join(f"{n}: {self._log_tail(n)}" for n in ["step", *self.nodes])
                    raise RayClusterError(
                        f"the job step of Ray's nodes exited early (status {process.returncode}): {tails} "
                        f"(all logs in {self.log_dir})"
                    )
            joined, gpus, problem = self.joined()
            if set(want) <= set(joined) and gpus >= len(want) * self.gpus_per_node:
                return
            time.sleep(2)
        missing = [n for n in want if n not in joined]
        raise RayClusterError(
            f"Ray cluster incomplete after {timeout_s:.0f} s: missing nodes {missing or 'none'}, "
            f"{gpus:g} of {len(want) * self.gpus_per_node} GPUs joined; logs in {self.log_dir}"
            + (f"; the last probe: {problem}" if problem else "")
        )

    def _log_tail(self, node: str) -> str:
        log = self.log_dir / f"ray-{node}.log"
        lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
        return " | ".join(lines[-3:]) or "no output"

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 20
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
        self.remove_temp_dirs()

    def remove_temp_dirs(self) -> None:
        """Ray's folder and the site's per-job folders on every node, once its processes are gone
        (this node's directly, the others' through a step of the job)."""
        folders = [folder for folder in [self.temp_dir, *self.job_folders] if folder]
        if not folders:
            return
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        others = self.nodes[1:]
        if not others:
            return
        # One step over every other node, not one after another (up to 60 s each on 16 nodes, #62).
        count = len(others)
        step = ["srun", f"--jobid={self.job_id}", f"--nodes={count}", f"--ntasks={count}", "--ntasks-per-node=1"]
        step += [f"--nodelist={','.join(others)}", "--overlap", "--kill-on-bad-exit=0"]
        try:
            subprocess.run([*step, "rm", "-rf", *folders], capture_output=True, timeout=60, env=self.env)
        except (OSError, subprocess.TimeoutExpired):
            pass  # node-local: the node's own cleanup at the job's end removes it
