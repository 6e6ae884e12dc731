"""A model's shape as its Hugging Face config.json gives it, and what a run's job.json records of the
model it loads: what the FLOPs count (analysis.per_run.model_flops) and the memory budget per GPU
(study.memory_budget) both read, so it sits below them."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling.fsutil import sha256_file

# Decoder-only dense models with this layer layout (attention projections + gated MLP).
DENSE_MODEL_TYPES = ("qwen2", "qwen3", "llama", "mistral")
REQUIRED_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
)


@dataclass(frozen=True)
class ModelShape:
    model_type: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int

    @classmethod
    def from_hf_config(cls, config: dict[str, Any]) -> ModelShape:
        """A Hugging Face config.json's shape; ValueError naming the key for one this count does not fit."""
        model_type = config.get("model_type")
        if model_type not in DENSE_MODEL_TYPES:
            raise ValueError(f"model_type {model_type!r}: the FLOPs count knows dense {', '.join(DENSE_MODEL_TYPES)}")
        for key in REQUIRED_KEYS:
            value = config.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"config.json {key}: {value!r}, expected a positive integer")
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(f"config.json head_dim: {head_dim!r}, expected a positive integer")
        return cls(model_type=model_type, head_dim=head_dim, **{k: config[k] for k in REQUIRED_KEYS})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelShape:
        return cls(**data)

    def layer_matmul_params(self) -> int:
        """Weights that multiply each token in the transformer layers (the model card's non-embedding
        parameters, less the norms' few)."""
        q = o = self.num_attention_heads * self.head_dim
        k = v = self.num_key_value_heads * self.head_dim
        per_layer = self.hidden_size * (q + k + v + o) + 3 * self.hidden_size * self.intermediate_size
        return self.num_hidden_layers * per_layer

    def matmul_params(self) -> int:
        return self.layer_matmul_params() + self.vocab_size * self.hidden_size

    def forward_flops(self, tokens: float, sequences: float) -> float:
        """One forward over `sequences` causal sequences holding `tokens` tokens in all."""
        mean_length = tokens / sequences
        attention = 2 * self.num_hidden_layers * self.num_attention_heads * self.head_dim * sequences * mean_length**2
        return 2 * self.matmul_params() * tokens + attention


def model_record(config_path: Path) -> dict[str, Any]:
    """What job.json says about the model a run loads, from its config.json: the file's digest and the
    shape MFU needs, or why there is none (the run still runs: its MFU is then "not measured")."""
    if not config_path.is_file():
        return {"shape": None, "reason": f"no {config_path}"}
    try:
        config = json.loads(config_path.read_text())
        shape = ModelShape.from_hf_config(config if isinstance(config, dict) else {})
    except (ValueError, UnicodeDecodeError) as error:
        return {"config_sha256": sha256_file(config_path), "shape": None, "reason": str(error)}
    return {"config_sha256": sha256_file(config_path), "shape": asdict(shape)}
