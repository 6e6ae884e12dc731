"""The Hydra overrides given to `python -m verl.trainer.main_ppo` (verl 0.9.1) for one run."""

from __future__ import annotations

from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.study.sections import Dataset, Memory, Site, StudyConfig, Training

# The name of a dataset's own reward file beside its rows (inputs.reward_file, which copies it there).
REWARD_COPY = "reward.py"

# The local engine's settings, each the fix for an obstacle of verl on CPU (docs/cpu-engine.md).
CPU_ENGINE_ARGS = [
    "trainer.device=cpu",
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.model.use_remove_padding=False",
    "actor_rollout_ref.actor.use_torch_compile=False",
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    "reward.num_workers=1",
    "data.dataloader_num_workers=0",
    "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    f"trainer.v1.sampler.custom_sampler.path={paths.PACKAGE_DIR / 'engines' / 'cpu' / 'replay.py'}",
    "trainer.v1.sampler.custom_sampler.name=FastPollReplayBuffer",
    # Start-up on 2 cores (benchmarks/local_run.py): the overlong-prompt filter in the trainer's own
    # process instead of a forked pool of one per dataset (same rows kept).
    "data.filter_overlong_prompts_workers=null",
]
# Set in every process verl starts (the trainer passes its environment on to Ray).
# Logical CPUs per node for Ray: TransferQueue and the agent loop need more slots than 2 real cores.
CPU_ENGINE_RAY_CPUS = 16
CPU_ENGINE_ENV = {
    "VERL_USE_EXTERNAL_MODULES": "rlvr_scaling.engines.cpu",
    "VERL_PLATFORM": "cpu",
    "VERL_ENGINE_DEVICE": "cuda",
    # Ray prestarts idle Python workers that verl never uses (about 45 MiB each).
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
    # TransferQueue sets torch to 8 threads around every put and get, warns ~150 times a step that
    # 2 cores cannot give 8, and makes those threads compete with the run's other processes: one
    # thread, as OMP_NUM_THREADS gives every other process of a local run.
    "TQ_NUM_THREADS": "1",
    # As `ray start --disable-usage-stats` on Slurm sites: no usage reports from a private instance.
    "RAY_USAGE_STATS_ENABLED": "0",
    # No scan of installed packages for verl plugins in each of the ~8 processes that import verl
    # (none is installed; the CPU engine comes through VERL_USE_EXTERNAL_MODULES).
    "VERL_USE_EXTERNAL_PLUGINS": "none",
}


def _flag(value: bool) -> str:
    return "True" if value else "False"


def build_verl_args(
    config: StudyConfig,
    site: Site,
    dataset: str,
    nodes: int,
    prompts: int,
    concurrency: int,
    experiment_name: str,
    root: Path,
) -> list[str]:
    data = config.datasets[dataset]
    data_dir = paths.dataset_dir(root, site.name, dataset)
    return [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=False",
        f"data.train_files={data_dir / 'train.parquet'}",
        f"data.val_files={data_dir / 'val.parquet'}",
        f"data.train_batch_size={prompts}",
        f"data.max_prompt_length={data.max_prompt_length}",
        f"data.max_response_length={data.max_response_length}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        f"actor_rollout_ref.model.path={paths.model_dir(root, site.name, config.model.folder_name())}",
        f"actor_rollout_ref.actor.optim.lr={float(config.algorithm.lr)}",
        # One optimiser step per RL step: the whole batch is one mini-batch.
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={data.memory.token_budget}",
        *_reward_args(data, data_dir),
        *_rollout_args(config, data, concurrency),
        *_trainer_args(config, site, nodes, experiment_name),
        *_training_engine_args(config.parallel.training, data.memory),
        *_site_args(site, nodes, config.parallel.training),
    ]


def _reward_args(data: Dataset, data_dir: Path) -> list[str]:
    """A dataset's own reward function: the copy the data stage put beside its rows (verl's
    custom_reward_function); else verl's built-in scorer, chosen by the rows' data_source."""
    if not data.reward.custom:
        return []
    return [
        f"reward.custom_reward_function.path={data_dir / REWARD_COPY}",
        f"reward.custom_reward_function.name={data.reward.function}",
    ]


def _rollout_args(config: StudyConfig, data: Dataset, concurrency: int) -> list[str]:
    rollout = config.parallel.rollout
    memory = data.memory
    share = rollout.gpu_memory_utilization if memory.gpu_memory_utilization is None else memory.gpu_memory_utilization
    return [
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
        f"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={memory.token_budget}",
        f"actor_rollout_ref.rollout.name={rollout.engine}",
        f"actor_rollout_ref.rollout.n={config.algorithm.responses_per_prompt}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={rollout.tensor_parallel}",
        f"actor_rollout_ref.rollout.data_parallel_size={rollout.data_parallel}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={share}",
        f"actor_rollout_ref.rollout.max_num_seqs={concurrency}",
        f"actor_rollout_ref.rollout.max_model_len={data.max_length}",
        f"actor_rollout_ref.rollout.max_num_batched_tokens={max(8192, data.max_length)}",
    ]


def _trainer_args(config: StudyConfig, site: Site, nodes: int, experiment_name: str) -> list[str]:
    steps = config.algorithm.steps
    return [
        f"trainer.nnodes={nodes}",
        f"trainer.n_gpus_per_node={site.hardware.gpus_per_node}",
        f"trainer.total_training_steps={steps}",
        # Each epoch holds at least one step, so this many epochs never stops a run early.
        f"trainer.total_epochs={steps}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=False",
        "trainer.resume_mode=disable",
        "trainer.critic_warmup=0",
        "trainer.logger=[console,file]",
        f"trainer.project_name={config.study.name}",
        f"trainer.experiment_name={experiment_name}",
    ]


def _training_engine_args(training: Training, memory: Memory) -> list[str]:
    if training.engine != "megatron":
        fsdp = "actor_rollout_ref.actor.fsdp_config"
        return [
            f"actor_rollout_ref.model.enable_gradient_checkpointing={_flag(memory.recompute)}",
            f"{fsdp}.param_offload={_flag(memory.offload)}",
            f"{fsdp}.optimizer_offload={_flag(memory.offload)}",
        ]
    megatron = "actor_rollout_ref.actor.megatron"
    args = [
        "model_engine=megatron",
        f"{megatron}.tensor_model_parallel_size={training.tensor_parallel}",
        f"{megatron}.pipeline_model_parallel_size={training.pipeline_parallel}",
        f"{megatron}.param_offload={_flag(memory.offload)}",
        f"{megatron}.optimizer_offload={_flag(memory.offload)}",
    ]
    if memory.recompute:
        args += [
            f"{megatron}.override_transformer_config.recompute_granularity=full",
            f"{megatron}.override_transformer_config.recompute_method=uniform",
            f"{megatron}.override_transformer_config.recompute_num_layers=1",
        ]
    return args


def _megatron_site_args(site: Site) -> list[str]:
    """The site's Megatron options (LUMI's ROCm stack: docs/lumi.md). The reference model inherits
    the actor's bridge and transformer overrides (verl's oc.select defaults)."""
    options = site.engine_options
    megatron = "actor_rollout_ref.actor.megatron"
    args = []
    if options.megatron_bridge is not None:
        args.append(f"{megatron}.vanilla_mbridge={_flag(options.megatron_bridge == 'mbridge')}")
    if options.gradient_accumulation_fusion is not None:
        # Not among verl's listed overrides: a new key of the transformer config ('+').
        flag = _flag(options.gradient_accumulation_fusion)
        args.append(f"+{megatron}.override_transformer_config.gradient_accumulation_fusion={flag}")
    if options.attention_backend is not None:
        args.append(f"{megatron}.override_transformer_config.attention_backend={options.attention_backend}")
    return args


def _site_args(site: Site, nodes: int, training: Training) -> list[str]:
    args = []
    eager = site.engine_options.rollout_enforce_eager
    if eager is not None:
        args.append(f"actor_rollout_ref.rollout.enforce_eager={_flag(eager)}")
    if site.engine_options.sleep_mode == "unavailable":
        # vLLM keeps its memory between phases: no sleep, and no freeing of the KV cache (which
        # goes through sleep in verl 0.9.1's vLLM server); the plan's memory budget counts it held.
        args += [
            "+actor_rollout_ref.rollout.enable_sleep_mode=False",
            "actor_rollout_ref.rollout.free_cache_engine=False",
        ]
    if training.engine == "megatron":
        args += _megatron_site_args(site)
    if site.cpu_engine:
        args += CPU_ENGINE_ARGS
        if site.launch.kind == "local":
            # verl starts Ray itself; with the Slurm launcher these are flags of `ray start` instead.
            args += [
                f"+ray_kwargs.ray_init.num_cpus={CPU_ENGINE_RAY_CPUS}",
                f"+ray_kwargs.ray_init.num_gpus={nodes * site.hardware.gpus_per_node}",
                # No dashboard: its nine processes start before the raylet, which waits for them.
                "+ray_kwargs.ray_init.include_dashboard=False",
            ]
    return args
