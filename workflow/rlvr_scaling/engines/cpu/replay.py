"""verl's v1 replay buffer polls for finished trajectories every 2 s, which on a tiny model is most
of a step. The same buffer, polling every 20 ms; selected by trainer.v1.sampler.custom_sampler."""

from __future__ import annotations

from typing import Any

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

POLL_INTERVAL_S = 0.02


class FastPollReplayBuffer(ReplayBuffer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["poll_interval"] = POLL_INTERVAL_S
        super().__init__(*args, **kwargs)
