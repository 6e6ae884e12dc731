"""Schema and semantic checks of the study: every failure names the key, the value and the rule."""

from __future__ import annotations

import functools
import math
import re
import string
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema

from rlvr_scaling.errors import MISSING, ConfigError
from rlvr_scaling.study.sections import Dataset, Site, StudyConfig
from rlvr_scaling.study.yaml_file import load_yaml_text

# Where a dataset's prompt template puts the question.
PLACEHOLDER = "{question}"
# Placeholders a site may use in container.binds and container.python (expanded by the launcher).
CONTAINER_PLACEHOLDERS = ("python_prefix", "python_base_prefix", "repo")


@functools.lru_cache(maxsize=8)
def _validator(schema_path: Path) -> jsonschema.protocols.Validator:
    schema = load_yaml_text(schema_path.read_text())
    # The schemas are the repository's, each checked against its metaschema by the tests
    # (tests/test_config.py): checking them again here cost every Snakemake start and step 0.2 s.
    cls = jsonschema.validators.validator_for(schema)
    # JSON Schema counts 20.0 as an integer; here it would make a second run id for the same run.
    strict = jsonschema.validators.extend(
        cls, type_checker=cls.TYPE_CHECKER.redefine("integer", lambda _checker, value: _is_int(value))
    )
    return strict(schema)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_finite(document: Any, path: tuple = ()) -> tuple[tuple, float] | None:
    """The first NaN or infinity in a document, with its path."""
    if isinstance(document, float) and not math.isfinite(document):
        return path, document
    items = (
        document.items() if isinstance(document, dict) else enumerate(document) if isinstance(document, list) else ()
    )
    for key, value in items:
        found = _non_finite(value, (*path, key))
        if found:
            return found
    return None


def _dotted(path: Any) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> tuple[str, Any, str]:
    key = _dotted(error.absolute_path)
    # A boolean subschema (`false`) has no keywords of its own: nothing to list or describe.
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    instance: Any = error.instance  # never unset on an error that iter_errors yields
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(instance) - set(allowed))
        prefix = f"{key}." if error.absolute_path else ""
        expected = f"it is not a known key (allowed here: {', '.join(allowed)})" if allowed else "it is not allowed"
        return f"{prefix}{extra[0]}", instance[extra[0]], expected
    if error.validator == "required":
        required: Any = error.validator_value
        missing = next((name for name in required if name not in instance), "?")
        prefix = f"{key}." if error.absolute_path else ""
        return f"{prefix}{missing}", MISSING, "it is required here"
    if error.validator in ("anyOf", "oneOf") and error.context:
        inner = min(error.context, key=lambda e: len(e.message))
        return key, instance, f"it does not match the rule: {inner.message}"
    description = schema.get("description")
    rule = f"it does not match the rule: {error.message}"
    if description:
        rule += f" ({description})"
    return key, instance, rule


def check_schema(document: Any, schema_path: Path, source: str = "config", ignore_required: bool = False) -> None:
    """Raise one ConfigError for the first problem (jsonschema's most relevant), in schema order;
    `ignore_required`: check the values that are there, not whether all are."""
    found = _non_finite(document)
    if found:
        raise ConfigError(_dotted(found[0]), found[1], "it must be a finite number (not NaN or an infinity)", source)
    errors = sorted(_validator(schema_path).iter_errors(document), key=jsonschema.exceptions.relevance)
    if ignore_required:
        errors = [e for e in errors if e.validator != "required"]
    if errors:
        key, value, expected = _describe(errors[0])
        raise ConfigError(key, value, expected, source)


def check_semantics(config: StudyConfig, site: Site) -> None:
    """What a schema cannot express: parallel layouts, caps against context, node lists."""
    _check_parallel(config, site)
    _check_model(config)
    _check_datasets(config)
    _check_strong_reference(config)
    _check_container(site)
    _check_fabric(site)
    _check_node_counts(config, site)
    _check_steps_and_selection(config)


def _check_parallel(config: StudyConfig, site: Site) -> None:
    gpus = site.hardware.gpus_per_node
    rollout = config.parallel.rollout
    per_replica = rollout.tensor_parallel * rollout.data_parallel
    if gpus % per_replica:
        raise ConfigError(
            "parallel.rollout",
            {"tensor_parallel": rollout.tensor_parallel, "data_parallel": rollout.data_parallel},
            f"tensor_parallel x data_parallel = {per_replica} must divide the site's {gpus} GPUs per node "
            "(rollout replicas stay node-local)",
        )
    training = config.parallel.training
    if gpus % training.tensor_parallel:
        raise ConfigError(
            "parallel.training.tensor_parallel",
            training.tensor_parallel,
            f"it must divide the site's {gpus} GPUs per node (tensor parallelism stays inside a node)",
        )


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
SEED = re.compile(r"seed-[0-9]+")


def _check_dataset_source(name: str, dataset: Dataset) -> None:
    """Where the rows come from: what each kind of source needs (the files are checked by the data
    stage's own check, inputs.data_check, when a study is planned)."""
    key = f"datasets.{name}"
    kind = dataset.kind
    if kind == "hub" and not HUB_ID.fullmatch(dataset.source):
        raise ConfigError(
            f"{key}.source",
            dataset.source,
            "a hub dataset id (owner/name), a local file or folder as a path starting with /, ./ or ../, "
            "or 'synthetic'",
        )
    if kind == "hub" and dataset.revision is None:
        raise ConfigError(f"{key}.revision", MISSING, "a hub dataset needs its branch, tag or commit (e.g. main)")
    if kind == "local" and dataset.revision is not None:
        raise ConfigError(
            f"{key}.revision",
            dataset.revision,
            "a local source has no revision: its files' checksums are locked in config/inputs.lock.json",
        )
    if kind == "synthetic":
        if dataset.generator is None:
            raise ConfigError(f"{key}.generator", MISSING, "synthetic data needs its generator (gsm8k or dapo_math)")
        if dataset.revision is None or not SEED.fullmatch(dataset.revision):
            raise ConfigError(f"{key}.revision", dataset.revision, "synthetic data needs a revision 'seed-N'")
        return  # the generator makes both splits
    if dataset.generator is not None:
        raise ConfigError(f"{key}.generator", dataset.generator, "only a synthetic source has a generator")
    if kind == "hub" and dataset.files.train is None:
        raise ConfigError(
            f"{key}.files.train", MISSING, "a hub dataset names its training file (or glob) in the repository"
        )
    if dataset.files.val is not None and dataset.held_out is not None:
        raise ConfigError(
            f"{key}.held_out", dataset.held_out, "either files.val or held_out gives the validation rows, not both"
        )
    if dataset.files.val is None and dataset.held_out is None:
        raise ConfigError(
            f"{key}.files.val",
            MISSING,
            "the validation rows come from a file (files.val) or are held out of train (held_out: N)",
        )


def _check_dataset_rows(name: str, dataset: Dataset) -> None:
    """How rows are built: the answer rule's marker, the prompt's placeholder, the reward."""
    key = f"datasets.{name}"
    rule = dataset.ground_truth
    if rule.rule == "after_marker" and rule.marker is None:
        raise ConfigError(f"{key}.ground_truth.marker", MISSING, "the rule after_marker needs its marker (e.g. '####')")
    if rule.rule not in ("after_marker", "number") and rule.marker is not None:
        raise ConfigError(f"{key}.ground_truth.marker", rule.marker, f"the rule {rule.rule} takes no marker")
    if dataset.prompt.count(PLACEHOLDER) != 1:
        raise ConfigError(f"{key}.prompt", dataset.prompt, f"the prompt template must hold {PLACEHOLDER} exactly once")
    reward = dataset.reward
    if not reward.custom and reward.data_source is None:
        raise ConfigError(
            f"{key}.reward",
            reward.to_dict(),
            "verl's built-in scorer is chosen by reward.data_source (openai/gsm8k, math_dapo, "
            "DigitalLearningGmbH/MATH-lighteval, ...); your own needs reward.file and reward.function",
        )


def _check_model(config: StudyConfig) -> None:
    model = config.model
    if model.source == "local" and model.path is None:
        raise ConfigError("model.path", MISSING, "a local model names its folder (config.json, weights, tokenizer)")
    if model.source != "local" and model.path is not None:
        raise ConfigError(
            "model.path", model.path, f"only model.source: local reads a folder (source is {model.source})"
        )


def _check_datasets(config: StudyConfig) -> None:
    context = config.model.max_context
    for name, dataset in config.datasets.items():
        _check_dataset_source(name, dataset)
        _check_dataset_rows(name, dataset)
        total = dataset.max_length
        if total > context:
            raise ConfigError(
                f"datasets.{name}.max_response_length",
                dataset.max_response_length,
                f"max_prompt_length + max_response_length = {total} must fit the model's context "
                f"model.max_context = {context}",
            )
        budget = dataset.memory.token_budget
        if budget < total:
            raise ConfigError(
                f"datasets.{name}.memory.token_budget",
                budget,
                f"it must be at least max_prompt_length + max_response_length = {total} "
                "(one whole trajectory must fit a micro-batch)",
            )


def _check_strong_reference(config: StudyConfig) -> None:
    scaling = config.scaling
    if scaling.strong_reference_nodes not in scaling.strong_nodes:
        raise ConfigError(
            "scaling.strong_reference_nodes",
            scaling.strong_reference_nodes,
            f"it must be one of scaling.strong_nodes {scaling.strong_nodes}",
        )


def _check_node_counts(config: StudyConfig, site: Site) -> None:
    gpus = site.hardware.gpus_per_node
    model_parallel = config.parallel.training.model_parallel
    max_nodes = site.slurm.max_nodes
    for key, node_counts in (("weak_nodes", config.scaling.weak_nodes), ("strong_nodes", config.scaling.strong_nodes)):
        for nodes in node_counts:
            if nodes > max_nodes:
                raise ConfigError(
                    f"scaling.{key}", nodes, f"site '{site.name}' allows at most {max_nodes} nodes per job"
                )
            if (nodes * gpus) % model_parallel:
                raise ConfigError(
                    f"scaling.{key}",
                    nodes,
                    f"{nodes} nodes x {gpus} GPUs must be a multiple of training tensor x pipeline "
                    f"parallel = {model_parallel}",
                )


def _check_steps_and_selection(config: StudyConfig) -> None:
    algorithm = config.algorithm
    if algorithm.warmup_steps >= algorithm.steps:
        raise ConfigError(
            "algorithm.warmup_steps",
            algorithm.warmup_steps,
            f"it must be smaller than algorithm.steps = {algorithm.steps} (some steps must be measured)",
        )
    adaptive = config.adaptive_steps
    if adaptive.enabled and algorithm.warmup_steps + adaptive.min_measured_steps >= algorithm.steps:
        raise ConfigError(
            "adaptive_steps.min_measured_steps",
            adaptive.min_measured_steps,
            f"with algorithm.warmup_steps = {algorithm.warmup_steps} a run could stop no earlier than step "
            f"{algorithm.warmup_steps + adaptive.min_measured_steps}, and it has only algorithm.steps = "
            f"{algorithm.steps}: fewer measured steps, or more steps",
        )
    names = ", ".join(config.datasets)
    for name in config.only_datasets or []:
        if name not in config.datasets:
            raise ConfigError("only_datasets", name, f"it must name a dataset ({names})")
    for name, prompts in config.selection.items():
        if name not in config.datasets:
            raise ConfigError(f"selection.{name}", prompts, f"it must name a dataset ({names})")
        if prompts is None:
            continue
        if prompts < 1:
            raise ConfigError(f"selection.{name}", prompts, "a pinned selection must be a positive prompt count")
        if prompts not in config.datasets[name].sweep:
            warnings.warn(
                f"selection.{name} = {prompts} is not in the sweep grid {config.datasets[name].sweep}; "
                "using it as pinned",
                stacklevel=3,  # the caller of check_semantics
            )


def _check_fabric(site: Site) -> None:
    """The bandwidth floor is set one way; and the launcher sets NCCL's debug output for the
    transport's record (engines.fabric): a site's own value would silence it, and every multi-node
    run would be recorded with no transport."""
    _check_bandwidth_floor(site)
    if not site.fabric.nccl:
        return
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"):
        if name in site.environment:
            raise ConfigError(
                f"environment.{name}",
                site.environment[name],
                f"no value: the launcher sets {name} on a {site.fabric.library} site, to record which "
                "transport each node's collectives used (docs/lumi.md, 'Collectives across nodes')",
                f"site '{site.name}'",
            )


def _check_bandwidth_floor(site: Site) -> None:
    fabric, where = site.fabric, f"site '{site.name}'"
    if fabric.bandwidth_floor_share is not None and fabric.expected_bus_bandwidth_gb_per_s is None:
        raise ConfigError(
            "fabric.bandwidth_floor_share",
            fabric.bandwidth_floor_share,
            "a share of fabric.expected_bus_bandwidth_gb_per_s, which the site does not set: set it "
            "(with fabric.expected_source), or an absolute fabric.bandwidth_floor_gb_per_s instead",
            where,
        )
    if fabric.bandwidth_floor_share is not None and fabric.bandwidth_floor_gb_per_s:
        raise ConfigError(
            "fabric.bandwidth_floor_gb_per_s",
            fabric.bandwidth_floor_gb_per_s,
            "no value beside fabric.bandwidth_floor_share: the floor is set one way, a share of the "
            "expected figure or an absolute one",
            where,
        )
    if fabric.expected_bus_bandwidth_gb_per_s is not None and not fabric.expected_source:
        raise ConfigError(
            "fabric.expected_source",
            "",
            "where fabric.expected_bus_bandwidth_gb_per_s comes from (the NICs' count and speed, and the page)",
            where,
        )


def _check_container(site: Site) -> None:
    container = site.container
    if container is None:
        return
    where = f"site '{site.name}'"
    squashfs = container.build == "venv-squashfs"
    suffix = ".sh.in" if squashfs else ".def.in"
    if not container.definition.endswith(suffix):
        raise ConfigError(
            "container.definition",
            container.definition,
            f"a {suffix} template for container.build {container.build!r} "
            f"(containers/verl-venv{'-squashfs.sh.in' if squashfs else '.def.in'})",
            where,
        )
    templates = [("binds", bind) for bind in container.binds]
    templates += [("exec_args", option) for option in container.exec_args]
    templates.append(("python", container.python))
    for key, template in templates:
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
        except ValueError as exc:
            raise ConfigError(f"container.{key}", template, f"it must be a valid template ({exc})", where) from exc
        unknown = fields - set(CONTAINER_PLACEHOLDERS)
        if unknown:
            raise ConfigError(
                f"container.{key}",
                template,
                f"its placeholders must be among {', '.join('{' + n + '}' for n in CONTAINER_PLACEHOLDERS)}",
                where,
            )
