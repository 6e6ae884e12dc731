"""One Ray cluster over a Slurm allocation: the head on the first node (where the launcher runs),
one worker per other node started with srun, all inside the site's container when it has one."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StudyError

NODE_RESOURCE = "rlvr_node_{}"
PROBE = """
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n["Alive"]]
print(json.dumps({"resources": [n["Resources"] for n in alive]}))
"""


NODE_IP = "from ray._private.services import get_node_ip_address; print(get_node_ip_address())"


def local_node_ip(python: list[str], env: dict[str, str]) -> str:
    """The address Ray itself picks for this node (each node picks its own the same way; Slurm's
    NodeAddr may be a name or, on a test cluster, a loopback address Ray does not serve on). Asked of
    the run's Python: the workflow's own environment need not have Ray, nor the same one."""
    result = subprocess.run([*python, "-c", NODE_IP], capture_output=True, text=True, timeout=120, env=env)
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
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def head_address(self) -> str:
        return f"{self.head_ip}:{self.port}"

    def _ray_start(self, index: int) -> list[str]:
        node = self.nodes[index]
        # The run's Python (inside the site's container when it has one) runs Ray's own CLI: no
        # dependence on an activated environment or on PATH inside the image.
        ray = [*self.python, "-m", "ray.scripts.scripts"]
        # srun gives each step Slurm's device variables again: drop the ones Ray must own.
        unset = [f"--unset={name}" for name in self.unset_environment]
        command = [
            *(["env", *unset] if unset else []),
            *ray,
            "start",
            "--block",
            f"--num-gpus={self.gpus_per_node}",
            f"--num-cpus={self.cpus_per_node}",
            f"--resources={json.dumps({NODE_RESOURCE.format(node): 1})}",
            "--disable-usage-stats",
        ]
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

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for index, node in enumerate(self.nodes):
            command = self._ray_start(index)
            if index > 0:
                # Explicit geometry: inside the job the executor stripped SLURM_*, so srun knows nothing.
                command = [
                    "srun",
                    f"--jobid={self.job_id}",
                    "--nodes=1",
                    "--ntasks=1",
                    f"--nodelist={node}",
                    f"--cpus-per-task={self.slurm_cpus_per_node}",
                    f"--gpus-per-node={self.gpus_per_node}",
                    "--overlap",
                    "--kill-on-bad-exit=0",
                    *command,
                ]
            log = open(self.log_dir / f"ray-{node}.log", "ab")
            self.processes.append(
                subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
            )
            if index == 0:
                self.wait(timeout_s=120, want_nodes=[node])

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
        resources = json.loads(lines[-1])["resources"]
        names = [n for n in self.nodes for r in resources if NODE_RESOURCE.format(n) in r]
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
                    raise RayClusterError(
                        f"a Ray process exited early (status {process.returncode}); see {self.log_dir}"
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
