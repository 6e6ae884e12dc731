"""The model stage: the study's model downloaded at a pinned revision, copied from a local folder
(both locked with their files' digests: inputs/input_lock), or a tiny one built here.

The tiny model (local site) has the Qwen3 architecture with random weights and a byte-level BPE
tokenizer trained on the local datasets' text; the same seed gives the same files.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rlvr_scaling.fsutil import json_text, sha256_file, staged_directory
from rlvr_scaling.inputs.chat_template import CHATML, install_template
from rlvr_scaling.inputs.hub import answered_commit, hub_call
from rlvr_scaling.inputs.input_lock import LOCAL_REVISION, check_files, locked_entry, record
from rlvr_scaling.inputs.synthetic import corpus
from rlvr_scaling.study.config import Study

CHAT_TEMPLATE = CHATML  # the tiny model's tokenizer brings ChatML, as Qwen's do
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TINY = {"vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "heads": 4}


def build_tokenizer(seed: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY["vocab_size"],
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(corpus(seed)), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(max_context: int, seed: int, output: Path) -> dict[str, Any]:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer(seed)
    heads = TINY["heads"]
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=TINY["hidden_size"],
        intermediate_size=TINY["intermediate_size"],
        num_hidden_layers=TINY["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=heads // 2,
        head_dim=TINY["hidden_size"] // heads,
        max_position_embeddings=max_context,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    model.save_pretrained(output, safe_serialization=True)
    tokenizer.save_pretrained(output)
    return {"parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tokenizer)}


def _resolve_model(name: str, revision: str) -> str:
    """The commit a branch (or tag, or commit) of a hub model names today."""
    from huggingface_hub import HfApi

    return answered_commit("model", name, revision, HfApi().model_info(name, revision=revision).sha)


def _fetch_model(name: str, commit: str, output: Path) -> None:
    from huggingface_hub import snapshot_download

    snapshot_download(name, revision=commit, local_dir=output)


def local_model_path(path: str, cwd: Path | None = None) -> Path:
    """model.path: relative to the working directory (the repository one runs from), ~ expanded."""
    folder = Path(path).expanduser()
    return folder if folder.is_absolute() else (cwd or Path.cwd()) / folder


def _copy_model(folder: Path, output: Path) -> None:
    """Every file of the folder (not a hub client's .cache), as it is."""
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and ".cache" not in relative.parts:
            (output / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, output / relative)


def model_files(folder: Path) -> dict[str, dict[str, Any]]:
    """Every file of the model with its size and sha256 (not the hub client's .cache)."""
    return {
        str(path.relative_to(folder)): {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".cache" not in path.relative_to(folder).parts
    }


def prepare_model(study: Study, output: Path) -> dict[str, Any]:
    """Build or download into a staging directory, then move into place with a manifest. A download
    takes the commit config/inputs.lock.json locks (inputs/input_lock), or locks the one it got."""
    spec = study.config.model
    entry = None
    with staged_directory(output) as staging:
        if spec.source == "tiny":
            seed = int(str(spec.revision).removeprefix("seed-"))
            details = build_tiny_model(spec.max_context, seed, staging)
            details.update(seed=seed, architecture="Qwen3ForCausalLM", random_weights=True)
        elif spec.source == "local":
            folder = local_model_path(str(spec.path))
            entry = locked_entry("model", str(spec.path), LOCAL_REVISION)
            _copy_model(folder, staging)
            details = {"path": str(folder), "commit": LOCAL_REVISION, "locked": entry is not None}
        else:
            entry = locked_entry("model", spec.name, spec.revision)
            hub = lambda call: hub_call("model", "model", spec.name, str(spec.revision), call)  # noqa: E731
            commit = entry["commit"] if entry else hub(lambda: _resolve_model(spec.name, spec.revision))
            hub(lambda: _fetch_model(spec.name, commit, staging))
            details = {"commit": commit, "locked": entry is not None}
        manifest = {"name": spec.name, "source": spec.source, "revision": spec.revision, **details}
        # Hashed once here, where the files were just written: a bundle names the weights it was
        # measured with without reading gigabytes again.
        manifest["files"] = model_files(staging)
        digests = {name: facts["sha256"] for name, facts in manifest["files"].items()}
        locked_as = str(spec.path) if spec.source == "local" else spec.name
        revision = LOCAL_REVISION if spec.source == "local" else spec.revision
        if entry is not None:
            check_files("model", locked_as, entry, digests)
        # After the digests: the lock holds the model's own files; the template is recorded beside them.
        manifest["chat_template"] = install_template(spec, staging)
        (staging / "rlvr_manifest.json").write_text(json_text(manifest))
    if spec.source != "tiny" and entry is None:
        record("model", locked_as, revision, manifest["commit"], digests)
    return manifest
