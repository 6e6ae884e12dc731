"""Load the study: config file, site file, the site's study overrides and --set overrides."""

from __future__ import annotations

import copy
import datetime as dt
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.fsutil import sha256_file
from rlvr_scaling.study.reference import load_reference
from rlvr_scaling.study.sections import Container, Dataset, Site, StudyConfig
from rlvr_scaling.study.site_overrides import SiteReplacement, replaced_values, site_study, with_site_part
from rlvr_scaling.study.toy_scale import replaces_model_whole, toy_overrides
from rlvr_scaling.study.validate import check_schema, check_semantics
from rlvr_scaling.study.yaml_file import nesting_problem, read_yaml


@dataclass(frozen=True)
class Study:
    """A validated study definition on one site."""

    config: StudyConfig
    site: Site
    # What the site's study_overrides changed in the user's config (shown by `plan`).
    site_replaced: tuple[SiteReplacement, ...] = ()

    @property
    def site_name(self) -> str:
        return self.site.name

    @property
    def name(self) -> str:
        return self.config.study.name

    @property
    def model_folder(self) -> str:
        return self.config.model.folder_name()

    def reference(self) -> dict[str, Any] | None:
        """The published study it reproduces (`study.reference`), read and checked; None: none named."""
        return load_reference(self.config.study.reference) if self.config.study.reference else None

    @property
    def datasets(self) -> list[str]:
        only = self.config.only_datasets
        return [d for d in self.config.datasets if not only or d in only]

    def dataset(self, name: str) -> Dataset:
        return self.config.datasets[name]

    def slurm_account(self) -> str | None:
        """The account from the config, else the first set environment variable the site names."""
        if self.config.slurm_account:
            return self.config.slurm_account
        for var in self.site.slurm.account_env:
            if os.environ.get(var):
                return os.environ[var]
        return None

    def require_container(self) -> Container:
        """The site's image settings, for the steps that only a container site has."""
        if self.site.container is None:
            raise StudyError(f"site '{self.site_name}' runs without a container: there is nothing to build")
        return self.site.container

    def require_account(self) -> str | None:
        account = self.slurm_account()
        if self.site.slurm.account_required and not account:
            names = ", ".join(f"${v}" for v in self.site.slurm.account_env)
            raise ConfigError(
                "slurm_account",
                None,
                f"site '{self.site_name}' needs a Slurm project account: set one of {names}, or "
                f"--config site={self.site_name} slurm_account=project_XXXXXXXXX (a --config on the command "
                "line replaces the whole of the profile's, site included)",
            )
        return account


def read_value(text: str) -> Any:
    """A value typed on a command line: a number when int() or float() reads it (1e-6, 010 = 10),
    else YAML ([1, 2], true, null, text). YAML 1.1's other readings stay text: yes/on are not booleans,
    1:30 and 0x10 not numbers, 2024-01-01 not a date."""
    stripped = text.strip()
    for number in (int, float):
        try:
            return number(stripped)
        except ValueError:
            pass
    try:
        value = yaml.safe_load(stripped)
    except yaml.YAMLError:
        return text
    if isinstance(value, bool):
        return value if stripped.lower() in ("true", "false") else text
    if isinstance(value, float) and not math.isfinite(value):
        return value  # .nan, .inf: kept as numbers, so the check names them as not finite
    if isinstance(value, int | float | dt.date):
        return text
    return value


def parse_set(assignment: str) -> tuple[list[str], Any]:
    """'a.b.c=value' -> (['a','b','c'], parsed value); the value is read by read_value (1, true, [1,2])."""
    if "=" not in assignment:
        raise ConfigError("--set", assignment, "each --set must look like dotted.key=value")
    key, raw = assignment.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError("--set", assignment, "the key must be a dotted path such as scaling.weak_nodes")
    return parts, read_value(raw) if raw.strip() else None


def set_dotted(config: dict[str, Any], parts: list[str], value: Any) -> None:
    node = config
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(".".join(parts[: i + 1]), child, "it is not a mapping, so it has no sub-keys")
        node = child
    node[parts[-1]] = value


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _read_site(name: str, sites_dir: Path, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A site file, merged over the site it `inherits` (a new cluster can start from a known one)."""
    path = sites_dir / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in sites_dir.glob("*.yaml"))
        raise ConfigError("site", name, f"it must name a file in {sites_dir} (known sites: {', '.join(known)})")
    site = read_yaml(path)
    if not isinstance(site, dict):
        raise ConfigError("(top level)", site, "a site file must be a mapping", f"site file {path.name}")
    parent = site.pop("inherits", None)
    if parent is None:
        return site
    if parent in (*seen, name):
        raise ConfigError("inherits", parent, "site files must not inherit in a circle", f"site file {path.name}")
    inherited = _read_site(parent, sites_dir, (*seen, name))
    _refuse_another_images_facts(site, inherited, parent, path.name)
    return deep_merge(inherited, site)


# What a site file says of its base image alone: a site naming another image must not take them over.
IMAGE_FACTS = ("base_packages", "base_sha256")


def _refuse_another_images_facts(site: dict[str, Any], inherited: dict[str, Any], parent: str, file: str) -> None:
    """A site that names its own base image and would inherit the package list (or digest) of the
    image its parent names: the resolve check judged another image than the one built (#61)."""
    own: dict[str, Any] = site["container"] if isinstance(site.get("container"), dict) else {}
    theirs: dict[str, Any] = inherited["container"] if isinstance(inherited.get("container"), dict) else {}
    if "base_image" not in own or own["base_image"] == theirs.get("base_image"):
        return
    for key in IMAGE_FACTS:
        if key not in own and theirs.get(key) is not None:
            raise ConfigError(
                f"container.{key}",
                theirs[key],
                f"the {key} of site '{parent}' describes its base image ({theirs.get('base_image')}), not this "
                f"site's own ({own['base_image']}): set container.{key} for your image "
                + (
                    "(its `pip list --format=freeze`, with a `# python X.Y` line), or `base_packages: null` if it is "
                    "unknown (plan then says what the image must bring)"
                    if key == "base_packages"
                    else "(sha256sum of the file), or `base_sha256: null` to check none"
                ),
                f"site file {file}",
            )


def load_site(name: str, sites_dir: Path = paths.SITES_DIR) -> dict[str, Any]:
    if not sites_dir.is_dir() or not paths.SITE_SCHEMA.is_file():
        raise StudyError(paths.missing_parts() or f"{sites_dir} is not a folder of site files")
    site = _read_site(name, sites_dir)
    path = sites_dir / f"{name}.yaml"
    check_schema(site, paths.SITE_SCHEMA, source=f"site file {path.name}")
    if site["name"] != name:
        raise ConfigError("name", site["name"], f"the site file {path.name} must carry name '{name}'", "site file")
    return site


def _retyped(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _retyped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_retyped(item) for item in value]
    return read_value(value) if isinstance(value, str) and value.strip() else value


def _retype_leaves(target: dict[str, Any], command_line: dict[str, Any], top: bool) -> None:
    for key, value in command_line.items():
        if key not in target:
            continue
        if isinstance(value, dict):
            if isinstance(target[key], dict):
                _retype_leaves(target[key], value, top=False)
        elif (isinstance(value, list) or not top) and target[key] == value:
            # Still what the command line said (--config is merged last): read it as --set would.
            target[key] = _retyped(value)


def typed_command_line(config: dict[str, Any], command_line: dict[str, Any]) -> dict[str, Any]:
    """The config with the values of Snakemake's --config read as --set reads them.

    Snakemake types a top-level `--config key=value` (int, float, bool) but reads the inside of a
    mapping with YAML's base loader, so `overrides={"algorithm.steps": 5}` arrives as the string '5',
    also after it is merged with an `overrides:` from a config file. Each leaf that still holds the
    command line's string is re-read; strings that came from config files stay strings.
    """
    typed = copy.deepcopy(config)
    _retype_leaves(typed, command_line, top=True)
    return typed


def with_reward_digests(config: dict[str, Any], cwd: Path | None = None) -> dict[str, Any]:
    """The config with each dataset's own reward file's sha256 (`reward.sha256`) filled in from the
    file, relative to the working directory: the digest enters the runs' identities, so a changed
    reward function names other runs. A config that carries the digests (the effective config the
    rules hand to each step, a bundle's) is read as it is, without the file."""
    datasets = config.get("datasets")
    if not isinstance(datasets, dict):
        return config
    filled = copy.deepcopy(config)
    for name, entry in filled["datasets"].items():
        reward = entry.get("reward") if isinstance(entry, dict) else None
        if not isinstance(reward, dict) or not isinstance(reward.get("file"), str) or reward.get("sha256"):
            continue
        path = Path(reward["file"]).expanduser()
        path = path if path.is_absolute() else (cwd or Path.cwd()) / path
        if not path.is_file():
            raise ConfigError(
                f"datasets.{name}.reward.file", reward["file"], f"it must be a Python file (looked for {path})"
            )
        reward["sha256"] = sha256_file(path)
    return filled


def study_from_dict(
    raw_config: dict[str, Any], sets: list[str] | tuple[str, ...] = (), site: str | None = None
) -> Study:
    """Build the study from an already-read config mapping (the Snakefile's `config`).

    The user's config (with --set and `overrides`) is checked first, as written: a bad value there is
    an error even where the site would replace it. Then the site's study_overrides go over it, what
    the user set explicitly goes over that, and the result is checked again.
    """
    if not isinstance(raw_config, dict):
        raise ConfigError("(top level)", raw_config, "the config must be a mapping")
    # Snakemake reads --configfile itself (read_yaml never sees it): the same limits, checked here.
    problem = nesting_problem(raw_config)
    if problem:
        raise StudyError(f"The config is not usable: {problem}")
    # `overrides` (dotted key -> value, e.g. from an extra --configfile) act exactly like --set; so
    # does `--set overrides={...}` (as Snakemake's --config overrides={...}), which is no plain key.
    overrides = raw_config.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise ConfigError("overrides", overrides, "it must map dotted keys to values")
    overrides = dict(overrides)
    plain_sets = []
    for parts, value in (parse_set(s) for s in sets):
        if parts == ["overrides"]:
            if not isinstance(value, dict):
                raise ConfigError("overrides", value, "it must map dotted keys to values")
            overrides.update(value)
        elif parts[0] == "overrides":
            overrides[".".join(parts[1:])] = value
        else:
            plain_sets.append((parts, value))
    parsed_sets = [(str(k).split("."), v) for k, v in overrides.items()] + plain_sets
    user = copy.deepcopy(raw_config)
    for parts, value in parsed_sets:
        set_dotted(user, parts, value)
    if site is not None:
        user["site"] = site
    site_name = user.setdefault("site", "local")
    if not isinstance(site_name, str):
        raise ConfigError("site", site_name, "it must be the name of a file in config/sites/")
    # Values as written; a section the site supplies may be missing (checked with the site below).
    check_schema(user, paths.CONFIG_SCHEMA, source="config", ignore_required=True)
    site_def = load_site(site_name)
    site_overrides = toy_overrides(site_def.get("toy_scale"), site_study(site_def, user), user)
    config = replaces_model_whole(deep_merge(user, site_overrides), site_overrides)
    # What the user set explicitly wins over the site's scaled-down study.
    for parts, value in parsed_sets:
        set_dotted(config, parts, value)
    # Before the reward digests are filled in: a digest is no value the site replaced.
    replaced = tuple(replaced_values(user, config, site_overrides))
    check_schema(config, paths.CONFIG_SCHEMA, source=f"config with site '{site_name}' study_overrides")
    config = with_reward_digests(config)
    study_config, site_record = StudyConfig.from_dict(config), Site.from_dict(site_def)
    try:
        check_semantics(study_config, site_record)
    except ConfigError as exc:
        raise with_site_part(exc, site_name, replaced) from None
    if study_config.study.reference:  # read and checked now, not when the tables are made
        load_reference(study_config.study.reference)
    return Study(config=study_config, site=site_record, site_replaced=replaced)


# What a study file gives whole rather than merged over config/config.yaml: its datasets are the
# study's (not added to the default ones), and its `study` names another study (its title, authors
# and reference are its own, or none).
REPLACED_KEYS = ("datasets", "study")


def over_study(base: dict[str, Any], layer: Any, source: str = "study file") -> dict[str, Any]:
    """`layer` (a study file) over `base`: mappings merge, lists and REPLACED_KEYS replace. A pinned
    selection the base carried for a dataset the layer's datasets no longer have is dropped."""
    if layer is None:
        return copy.deepcopy(base)
    if not isinstance(layer, dict):
        raise ConfigError("(top level)", layer, "a study file must be a mapping of config keys", source)
    merged = deep_merge(base, {key: value for key, value in layer.items() if key not in REPLACED_KEYS})
    for key in REPLACED_KEYS:
        if key in layer:
            merged[key] = copy.deepcopy(layer[key])
    datasets, selection = layer.get("datasets"), merged.get("selection")
    if isinstance(datasets, dict) and isinstance(selection, dict):
        asked = layer.get("selection")
        asked = asked if isinstance(asked, dict) else {}
        merged["selection"] = {name: value for name, value in selection.items() if name in datasets or name in asked}
    return merged


def study_document(study_files: list[Path] | tuple[Path, ...]) -> dict[str, Any]:
    """config/config.yaml with each study file over it, in order (over_study): what
    `snakemake --configfile A --configfile B` and `rlvr-scaling plan --config A` read."""
    document = read_yaml(paths.DEFAULT_CONFIG) or {}
    for path in study_files:
        document = over_study(document, read_yaml(Path(path)), f"study file {path}")
    return document


def is_whole_config(path: Path) -> bool:
    """config/config.yaml itself, or a resolved config (JSON: the one the rules hand to each step, a
    bundle's study/config.json): read as it is, not over the defaults."""
    return path.suffix == ".json" or path.resolve() == paths.DEFAULT_CONFIG.resolve()


def load_study(
    config_path: Path | str | list[Path | str] | tuple[Path | str, ...] = paths.DEFAULT_CONFIG,
    sets: list[str] | tuple[str, ...] = (),
    site: str | None = None,
) -> Study:
    """The study config files give: YAML study files are read over config/config.yaml in order (as
    Snakemake's --configfile A B reads them, see study_document), config/config.yaml and a JSON config
    alone (one file only)."""
    config_paths = [Path(p) for p in ([config_path] if isinstance(config_path, str | Path) else config_path)]
    if paths.missing_parts() and not all(path.suffix == ".json" for path in config_paths):
        raise StudyError(paths.missing_parts())
    whole = [path for path in config_paths if is_whole_config(path)]
    if whole and len(config_paths) > 1:
        raise ConfigError(
            "--config",
            str(whole[0]),
            "a whole config (config/config.yaml or a resolved JSON config) is read alone; several --config "
            "files are study files read over config/config.yaml",
        )
    raw = read_yaml(config_paths[0]) if whole else study_document(config_paths)
    return study_from_dict(raw or {}, sets=sets, site=site)
