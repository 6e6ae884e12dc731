"""The study definition: loading, sites, overrides, and bad input stopped with key, value and rule."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import types
import typing
from pathlib import Path

import pytest
import yaml
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.paths import CONFIG_SCHEMA, DEFAULT_CONFIG, SITE_SCHEMA, SITES_DIR
from rlvr_scaling.plan_view import plan_table
from rlvr_scaling.study.config import load_site, load_study, read_value, typed_command_line
from rlvr_scaling.study.plan import build_plan
from rlvr_scaling.study.section_base import Section
from rlvr_scaling.study.sections import Site, StudyConfig

from .conftest import PYTHON, REPO

SITES = sorted(path.stem for path in SITES_DIR.glob("*.yaml"))


def test_lumi_study_encodes_the_published_settings() -> None:
    study = load_study(site="lumi")
    cfg = study.config.to_dict()  # as the config file and the site's overrides wrote it
    assert cfg["model"]["name"] == "Qwen/Qwen3-8B"
    assert cfg["algorithm"] == {"name": "grpo", "responses_per_prompt": 8, "lr": 0.0, "steps": 20, "warmup_steps": 1}
    assert cfg["datasets"]["gsm8k"]["max_response_length"] == 1024
    assert cfg["datasets"]["dapo_math"]["max_response_length"] == 8192
    assert cfg["datasets"]["gsm8k"]["memory"]["recompute"] is False
    assert cfg["datasets"]["dapo_math"]["memory"] == {
        "recompute": True,
        "offload": True,
        "token_budget": 10240,
        # Ours, not published: LUMI's vLLM cannot sleep, so its share stays beside Megatron's training
        # (config/sites/lumi.yaml study_overrides; tests/test_memory_budget.py). The study file's is 0.75.
        "gpu_memory_utilization": 0.6,
    }
    assert cfg["datasets"]["gsm8k"]["memory"]["gpu_memory_utilization"] == 0.4
    assert cfg["scaling"] == {
        "weak_nodes": [1, 2, 4, 8, 16],
        "strong_nodes": [1, 2, 4, 8, 16],
        "strong_reference_nodes": 4,
    }
    assert cfg["parallel"]["rollout"]["tensor_parallel"] == 4 and cfg["parallel"]["rollout"]["data_parallel"] == 2
    assert cfg["parallel"]["training"]["tensor_parallel"] == 8
    assert study.site.hardware.gpus_per_node == 8
    assert study.site.slurm.partition == "standard-g"
    # The AIF image brings its own libfabric and libcxi: no host copy bound over them.
    assert not [b for b in study.site.container.binds if b.startswith(("/opt/cray", "/usr/lib64"))]
    # Every device list Slurm sets goes, but the one Ray sets per worker (HIP_VISIBLE_DEVICES).
    unset = study.site.launch.unset_environment
    assert {"ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"} <= set(unset)
    assert "HIP_VISIBLE_DEVICES" not in unset


def test_default_site_is_local_and_scaled_down() -> None:
    study = load_study()
    assert study.site_name == "local"
    assert study.config.model.source == "tiny"
    assert study.config.scaling.weak_nodes == [1, 2]
    # The contrast of the real study survives the scaling down.
    data = study.config.datasets
    assert data["dapo_math"].max_response_length > data["gsm8k"].max_response_length


def test_set_overrides_win_over_the_site() -> None:
    study = load_study(sets=["algorithm.steps=3", "scaling.weak_nodes=[1]"])
    assert study.config.algorithm.steps == 3
    assert study.config.scaling.weak_nodes == [1]


def test_set_overrides_as_a_mapping_acts_as_snakemakes_config_overrides() -> None:
    """`plan --set overrides={...}` once exited 0 and ignored the values that `snakemake --config
    overrides={...}` refuses: both now read them as dotted keys, checked alike."""
    assert load_study(sets=['overrides={"algorithm.steps": 5}']).config.algorithm.steps == 5
    assert load_study(sets=["overrides.algorithm.steps=6"]).config.algorithm.steps == 6
    with pytest.raises(ConfigError) as refused:
        load_study(sets=['overrides={"algorithm.steps": -3}'])
    assert "algorithm.steps" in str(refused.value) and "-3" in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        load_study(sets=["overrides=7"])
    assert "overrides" in str(refused.value)


@pytest.mark.parametrize(
    ("assignment", "key", "fragment"),
    [
        ("algorithm.stepz=3", "algorithm.stepz", "not a known key"),
        ("algorithm.steps=many", "algorithm.steps", "not of type 'integer'"),
        ("parallel.rollout.tensor_parallel=3", "parallel.rollout", "must divide"),
        ("datasets.gsm8k.max_response_length=40500", "datasets.gsm8k.max_response_length", "context"),
        ("scaling.weak_nodes=[1,0]", "scaling.weak_nodes.1", "minimum"),
        ("scaling.strong_reference_nodes=3", "scaling.strong_reference_nodes", "strong_nodes"),
        ("datasets.gsm8k.memory.token_budget=100", "datasets.gsm8k.memory.token_budget", "at least"),
        ("study.name=bad;name", "study.name", "does not match"),
        ("selection.gsm8k=0", "selection.gsm8k", "positive"),
        ("algorithm.warmup_steps=20", "algorithm.warmup_steps", "smaller"),
        # NaN and infinities reached verl or crashed the selection and the plan; 20.0 made new run ids
        ("algorithm.lr=.nan", "algorithm.lr", "finite number"),
        ("selection_rule.tolerance=.nan", "selection_rule.tolerance", "finite number"),
        (
            "datasets.gsm8k.estimate.seconds_per_trajectory=.inf",
            "datasets.gsm8k.estimate.seconds_per_trajectory",
            "finite",
        ),
        ("scaling.weak_nodes=[1,-.inf]", "scaling.weak_nodes.1", "finite number"),
        ("algorithm.steps=20.0", "algorithm.steps", "not of type 'integer'"),
        ("algorithm.steps=true", "algorithm.steps", "not of type 'integer'"),
    ],
)
def test_bad_input_names_key_value_and_rule(assignment: str, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_study(site="lumi", sets=[assignment])
    assert caught.value.key == key
    assert fragment in str(caught.value)


def test_pinned_selection_outside_the_grid_warns() -> None:
    with pytest.warns(UserWarning, match="not in the sweep grid"):
        load_study(site="lumi", sets=["selection.gsm8k=120"])


def test_unknown_site_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigError,
        match="known sites: ci-apptainer, ci-apptainer-squashfs, ci-slurm, local, lumi, nvidia-4gpu-example, "
        "nvidia-example",
    ):
        load_study(site="nowhere")


def test_cli_exits_2_with_one_clear_paragraph() -> None:
    result = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--site", "lumi", "--set", "scaling.weak_nodes=[1,-2]"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert "scaling.weak_nodes.1" in result.stderr and "-2" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_site_can_inherit_another() -> None:
    study = load_study(site="ci-slurm")
    assert study.site.cpu_engine and study.site.launch.kind == "ray-srun"
    assert study.site.launch.unset_environment == ["ROCR_VISIBLE_DEVICES"]
    assert study.config.model.source == "tiny"  # the local site's scaled-down study


def _config_with(tmp_path: Path, **algorithm: object) -> Path:
    """config/config.yaml as a user edited it, the algorithm section changed."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["algorithm"].update(algorithm)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_bad_value_is_an_error_even_where_the_site_replaces_it(tmp_path: Path) -> None:
    # The local site replaces algorithm.steps; a broken value in the user's file used to pass `plan`
    # and fail `snakemake -n`.
    with pytest.raises(ConfigError) as caught:
        load_study(_config_with(tmp_path, steps="twenty"))
    assert caught.value.key == "algorithm.steps" and caught.value.value == "twenty"


def test_the_values_the_site_replaced_are_listed_and_removed_datasets_stay_removed(tmp_path: Path) -> None:
    path = _config_with(tmp_path, steps=7)
    config = yaml.safe_load(path.read_text())
    del config["datasets"]["dapo_math"], config["selection"]["dapo_math"]
    path.write_text(yaml.safe_dump(config))
    study = load_study(path)
    assert list(study.config.datasets) == ["gsm8k"]
    replaced = {r.key: (r.yours, r.site) for r in study.site_replaced}
    assert replaced["algorithm.steps"] == (7, 11)
    assert not any(key.startswith("datasets.dapo_math") for key in replaced)
    table = plan_table(study, build_plan(study, {}, tmp_path), tmp_path)
    assert re.search(r"^  algorithm\.steps\s+7 -> 11$", table, re.M), table
    assert "--set key=value" in table
    # What the user sets explicitly wins and is not reported as replaced.
    explicit = load_study(path, sets=["algorithm.steps=7"])
    assert explicit.config.algorithm.steps == 7
    assert "algorithm.steps" not in {r.key for r in explicit.site_replaced}


def test_a_site_missing_a_required_key_names_the_key(tmp_path: Path) -> None:
    site = yaml.safe_load((REPO / "config" / "sites" / "lumi.yaml").read_text())
    del site["hardware"]["gpus_per_node"]
    (tmp_path / "lumi.yaml").write_text(yaml.safe_dump(site))
    with pytest.raises(ConfigError) as caught:
        load_site("lumi", tmp_path)
    assert caught.value.key == "hardware.gpus_per_node"
    assert "key 'hardware.gpus_per_node' is missing, but it is required" in str(caught.value)


def test_a_bad_gpu_memory_unit_names_the_key_the_value_and_the_units(tmp_path: Path) -> None:
    site = yaml.safe_load((REPO / "config" / "sites" / "lumi.yaml").read_text())
    site["hardware"]["gpu_memory_unit"] = "GiByte"
    (tmp_path / "lumi.yaml").write_text(yaml.safe_dump(site))
    with pytest.raises(ConfigError) as caught:
        load_site("lumi", tmp_path)
    assert caught.value.key == "hardware.gpu_memory_unit" and caught.value.value == "GiByte"
    assert "'GiByte' is not one of ['GiB', 'GB']" in str(caught.value)


@pytest.mark.parametrize(("site", "unit"), [("lumi", "GiB"), ("nvidia-example", "GiB"), ("local", "GB")])
def test_each_site_file_states_its_gpu_memory_unit(site: str, unit: str) -> None:
    # Written in the file, not left to the default: LUMI's GCD and NVIDIA's "80 GB" are binary sizes.
    raw = yaml.safe_load((SITES_DIR / f"{site}.yaml").read_text())
    assert raw["hardware"]["gpu_memory_unit"] == unit
    assert load_study(site=site).site.hardware.gpu_memory_unit == unit


def test_a_site_that_states_no_unit_keeps_gb() -> None:
    # What the memory budget took before sites stated a unit: such a site's figures do not move.
    hardware = load_site("lumi")["hardware"]
    del hardware["gpu_memory_unit"]
    assert Site.from_dict({**load_site("lumi"), "hardware": hardware}).hardware.gpu_memory_unit == "GB"


def test_command_line_values_inside_a_mapping_are_typed_like_set() -> None:
    # Snakemake's --config 'overrides={"algorithm.steps": 5}' hands over {'algorithm.steps': '5'}.
    command_line = {"overrides": {"algorithm.steps": "5", "scaling.weak_nodes": "[1, 2]"}, "site": "local"}
    file_config = {"study": {"name": "x"}, "model": {"revision": "2024"}}
    typed = typed_command_line({**file_config, **command_line}, command_line)
    assert typed["overrides"] == {"algorithm.steps": 5, "scaling.weak_nodes": [1, 2]}
    assert typed["model"]["revision"] == "2024"  # a string in a config file stays a string
    assert typed["site"] == "local"


def test_command_line_values_merged_with_config_files_are_still_typed() -> None:
    # --config 'algorithm={"steps": 5}' is merged into config.yaml's algorithm section, and
    # --config 'overrides={...}' into an extra --configfile's overrides: each leaf is re-read.
    merged = {"algorithm": {"name": "grpo", "steps": "5"}, "overrides": {"scaling.weak_nodes": "[1]", "x.y": "keep"}}
    command_line = {"algorithm": {"steps": "5"}, "overrides": {"scaling.weak_nodes": "[1]"}}
    typed = typed_command_line(merged, command_line)
    assert typed["algorithm"] == {"name": "grpo", "steps": 5}
    assert typed["overrides"] == {"scaling.weak_nodes": [1], "x.y": "keep"}


@pytest.mark.parametrize(
    ("text", "value"),
    [("1e-6", 1e-6), ("010", 10), ("yes", "yes"), ("12:30", "12:30"), ("2024-01-01", "2024-01-01"), ("[1, 2]", [1, 2])],
)
def test_command_line_values_read_as_numbers_first_and_never_as_yaml_1_1_surprises(text: str, value: object) -> None:
    assert read_value(text) == value and type(read_value(text)) is type(value)


def test_a_section_the_site_supplies_may_be_left_out_of_the_users_config(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    del config["model"]  # the local site brings its tiny model
    # A whole config (JSON, as the rules hand it to each step): a YAML study file would be read over
    # config/config.yaml, whose model it would keep.
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert load_study(path).config.model.name == "tiny-qwen3"
    with pytest.raises(ConfigError) as caught:
        load_study(path, site="lumi")
    assert caught.value.key == "model" and "is missing" in str(caught.value)


def test_the_effective_config_is_read_as_json_so_small_numbers_stay_numbers(tmp_path: Path) -> None:
    # The rules hand each step results/.study/config-*.json; YAML 1.1 reads JSON's 1e-05 as text.
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["overrides"] = {"datasets.gsm8k.estimate.seconds_per_trajectory": 0.00001}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert "1e-05" in path.read_text()
    assert load_study(path).dataset("gsm8k").estimate.seconds_per_trajectory == 0.00001


def _schema_sections(schema: dict, node: dict, record: type, where: str) -> list[tuple[str, set, set]]:
    """(where, the schema's keys, the record's fields) for a record and every record inside it."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].split("/")[-1]]
    if "anyOf" in node:
        node = next(option for option in node["anyOf"] if option.get("type") == "object")
    hints = typing.get_type_hints(record)
    found = [(where, set(node["properties"]), {f.name for f in dataclasses.fields(record)} - {"raw"})]
    for name, field_schema in node["properties"].items():
        hint = hints.get(name)
        if isinstance(hint, types.UnionType):  # X | None
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        if typing.get_origin(hint) is dict:  # a mapping of named records, such as datasets
            hint, field_schema = typing.get_args(hint)[-1], field_schema.get("additionalProperties", {})
        if isinstance(hint, type) and issubclass(hint, Section):
            found += _schema_sections(schema, field_schema, hint, f"{where}.{name}")
    return found


@pytest.mark.parametrize(("schema_path", "record"), [(CONFIG_SCHEMA, StudyConfig), (SITE_SCHEMA, Site)])
def test_every_key_of_the_schema_is_a_typed_field(schema_path: Path, record: type) -> None:
    schema = yaml.safe_load(schema_path.read_text())
    for where, keys, field_names in _schema_sections(schema, schema, record, record.__name__):
        assert keys == field_names, where


@pytest.mark.parametrize("site", SITES)
def test_the_typed_study_gives_back_exactly_what_was_read(site: str) -> None:
    # Run ids hash the sections as written: typing them must not add a default or drop a key.
    # A 4-GPU node cannot hold the default study's rollout (4 x 2 GPUs): its site's example study.
    config = REPO / "config" / "examples" / "own-study.yaml" if site == "nvidia-4gpu-example" else DEFAULT_CONFIG
    study = load_study(config, site=site)
    assert Site.from_dict(study.site.to_dict()) == study.site
    raw_site = load_site(site)
    assert study.site.to_dict() == raw_site and study.site.slurm.to_dict() == raw_site["slurm"]
    first = study.datasets[0]
    assert study.config.datasets[first].memory.to_dict() == study.config.to_dict()["datasets"][first]["memory"]


def test_optional_site_keys_hold_their_effective_values() -> None:
    local, lumi = load_study().site, load_study(site="lumi").site
    assert local.container is None and local.storage.results is None and local.launch.node_interface is None
    assert local.slurm.preflight_minutes == 20 and local.engine_options.rollout_enforce_eager is None
    assert (
        lumi.container is not None and lumi.container.runtime == "singularity" and lumi.container.build == "definition"
    )
    assert lumi.launch.node_interface == "hsn0" and lumi.slurm.preflight_partition == "small-g"
    assert "constraints" not in lumi.container.to_dict() and lumi.container.constraints is None


def test_every_schema_of_the_repository_is_a_valid_schema_of_its_draft() -> None:
    """The study's checks trust the schemas (study/validate.py no longer checks them at each start):
    this is where an edited schema that its metaschema refuses is caught."""
    import jsonschema

    schemas = sorted((REPO / "config" / "schema").glob("*.yaml"))
    assert {p.name for p in schemas} >= {"config.schema.yaml", "site.schema.yaml", "reference.schema.yaml"}
    for path in schemas:
        schema = yaml.safe_load(path.read_text())
        jsonschema.validators.validator_for(schema).check_schema(schema)
    # What the check catches: a keyword with a value its draft does not allow.
    broken = {**yaml.safe_load(CONFIG_SCHEMA.read_text()), "type": 5}
    with pytest.raises(jsonschema.exceptions.SchemaError):
        jsonschema.validators.validator_for(broken).check_schema(broken)
