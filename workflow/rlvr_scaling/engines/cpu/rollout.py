"""The `hf` rollout for verl: a replica that starts HFGenerationServer actors, and the trainer-side
adapter that pushes updated weights to them each step."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry

from .hf_server import HFGenerationServer

ROLLOUT_NAME = "hf"


def server_name(replica_rank: int) -> str:
    return f"{ROLLOUT_NAME}_server_{replica_rank}_0"


class HFReplica(RolloutReplica):
    """One generation server per replica, on the node of the replica's first worker."""

    async def launch_servers(self) -> None:
        if not self.workers:
            raise RuntimeError("the hf rollout runs colocated with the trainer (hybrid mode) only")
        node_id = await self.workers[0].__ray_call__.remote(lambda _: ray.get_runtime_context().get_node_id())
        name = server_name(self.replica_rank)
        env = {k: os.environ[k] for k in ("VERL_USE_EXTERNAL_MODULES", "VERL_PLATFORM") if k in os.environ}
        server = (
            ray.remote(HFGenerationServer)
            .options(
                name=name,
                num_cpus=0,
                max_concurrency=self.max_concurrency,
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False
                ),
                runtime_env={"env_vars": env},
            )
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        # Not awaited: the server loads its model while verl goes on to start the load balancer and
        # the agent loop (~11 s of a local start-up). Ray holds every call to it, the weight push
        # that follows included, until its constructor has returned, and raises its error there.
        self.servers = [server]
        self._server_handle = server
        self._server_address = name


class HFServerAdapter(BaseRollout):
    """Lives in every trainer worker; the first worker of each replica talks to its server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ["RANK"])
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.has_server = rank % world == 0
        self.server_handle: Any = None

    def _server(self) -> Any:
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_name(self.replica_rank))
        return self.server_handle

    async def resume(self, tags: list[str]) -> None:
        if self.has_server:
            await self._server().wake_up.remote(tags=tags)

    async def release(self) -> None:
        if self.has_server:
            await self._server().sleep.remote()

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        wire_format: str = "named_tensors",
        global_steps: int | None = None,  # after wire_format as in BaseRollout's signature; verl passes both by name
        **kwargs: Any,
    ) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout takes full named tensors, not {wire_format!r}")
        state: dict[str, torch.Tensor] = {}
        # Every rank walks the generator: producing a full tensor may be a collective over FSDP shards.
        for name, tensor in weights:
            if self.has_server:
                full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
                state[name] = full.detach().to("cpu", copy=True)
        if self.has_server:
            await self._server().update_weights.remote(state, global_steps)

    def generate_sequences(self, prompts: Any) -> Any:
        raise NotImplementedError("the hf rollout serves the async agent loop only")


def register() -> None:
    RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFReplica)
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.HFServerAdapter"
