"""A generation server for the local engine: transformers `generate` in a Ray actor.

It plays the part vLLM plays on a GPU site: token ids in, token ids and log-probs out, requests
batched as they arrive (continuous batching in miniature), weights replaced by the trainer each step.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

# How long the server waits for more requests before it starts a batch: the agent loop sends a
# step's requests within milliseconds of each other.
BATCH_WINDOW_S = 0.02


@dataclass
class _Request:
    prompt_ids: list[int]
    max_tokens: int
    sampling: tuple[float, float, int, bool]
    future: asyncio.Future = field(repr=False)


class HFGenerationServer:
    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(int(os.environ.get("RLVR_GENERATION_THREADS", "1")))
        self.config = config
        self.replica_rank = replica_rank
        path = getattr(model_config, "local_path", None) or model_config.path
        # Any: transformers types the auto class's model so that its generate() takes no self it accepts.
        self.model: Any = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
        self.model.eval()
        generation = self.model.generation_config
        eos = generation.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
        pad = generation.pad_token_id if generation.pad_token_id is not None else next(iter(self.eos_ids), 0)
        self.pad_id = int(pad)
        self.max_batch = max(1, int(config.max_num_seqs))
        self.global_steps: int | None = None
        self.weight_version = 0
        self._model_lock = threading.Lock()
        self._pending: list[_Request] = []
        self._worker: asyncio.Task | None = None

    async def ready(self) -> bool:
        return True

    # ---- generation -------------------------------------------------------------------------
    def _max_tokens(self, prompt_len: int, sampling_params: dict[str, Any]) -> int:
        config = self.config
        room = config.max_model_len - prompt_len if config.max_model_len else config.response_length
        if room < 1:
            raise ValueError(
                f"prompt of {prompt_len} tokens leaves no room within max_model_len {config.max_model_len}"
            )
        requested = sampling_params.get("max_tokens", sampling_params.get("max_new_tokens"))
        if requested is None:
            requested = min(config.response_length, config.prompt_length + config.response_length - prompt_len)
        return max(1, min(int(requested), room))

    async def generate(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str, **kwargs: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        prompt_ids = [int(t) for t in prompt_ids]
        params = dict(sampling_params)
        sampling = (
            float(params.get("temperature", 1.0)),
            float(params.get("top_p", 1.0)),
            int(params.get("top_k", -1) or -1),
            bool(params.get("logprobs", False)),
        )
        loop = asyncio.get_running_loop()
        request = _Request(prompt_ids, self._max_tokens(len(prompt_ids), params), sampling, loop.create_future())
        self._pending.append(request)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        token_ids, log_probs = await request.future
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if sampling[3] else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(BATCH_WINDOW_S)
            key = (self._pending[0].sampling, self._pending[0].max_tokens)
            batch = [r for r in self._pending if (r.sampling, r.max_tokens) == key][: self.max_batch]
            for request in batch:
                self._pending.remove(request)
            try:
                results = await asyncio.to_thread(self._generate_batch, batch)
            except Exception as exc:  # every waiting request must learn of the failure
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(exc)
                continue
            for request, result in zip(batch, results, strict=True):
                if not request.future.done():
                    request.future.set_result(result)

    @torch.no_grad()
    def _generate_batch(self, batch: list[_Request]) -> list[tuple[list[int], list[float]]]:
        temperature, top_p, top_k, _ = batch[0].sampling
        width = max(len(r.prompt_ids) for r in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, request in enumerate(batch):  # left padding: generation continues from the right edge
            input_ids[row, width - len(request.prompt_ids) :] = torch.tensor(request.prompt_ids)
            attention[row, width - len(request.prompt_ids) :] = 1
        sample = temperature > 0
        options: dict[str, Any] = {
            "max_new_tokens": batch[0].max_tokens,
            "do_sample": sample,
            "pad_token_id": self.pad_id,
            "eos_token_id": sorted(self.eos_ids) or None,
            "output_logits": True,
            "return_dict_in_generate": True,
        }
        if sample:
            options.update(temperature=temperature, top_p=top_p, top_k=top_k if top_k > 0 else 0)
        with self._model_lock:
            output = self.model.generate(input_ids=input_ids, attention_mask=attention, **options)
        generated = output.sequences[:, width:]
        # vLLM reports the model's raw log-probs of the sampled tokens; so does this server.
        logits = torch.stack(output.logits, dim=1).float()
        log_probs = torch.log_softmax(logits, dim=-1).gather(-1, generated.unsqueeze(-1)).squeeze(-1)
        results = []
        for row in range(len(batch)):
            tokens = generated[row].tolist()
            end = len(tokens)
            for i, token in enumerate(tokens):
                if token in self.eos_ids:
                    end = i + 1
                    break
            results.append((tokens[:end], log_probs[row, :end].tolist()))
        return results

    # ---- control, as verl's rollout manager drives a vLLM server ------------------------------
    async def update_weights(self, state: dict[str, torch.Tensor], global_steps: int | None = None) -> dict:
        start = time.perf_counter()
        with self._model_lock:
            result = self.model.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            raise RuntimeError(f"weights the generation model does not have: {result.unexpected_keys[:5]}")
        self.weight_version += 1
        if global_steps is not None:
            self.global_steps = global_steps
        return {"tensors": len(state), "seconds": time.perf_counter() - start, "version": self.weight_version}

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        while self._pending or (self._worker is not None and not self._worker.done()):
            await asyncio.sleep(BATCH_WINDOW_S)

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None
