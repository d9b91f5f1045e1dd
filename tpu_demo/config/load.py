"""Reading the one YAML (and the command line's `key=value` overrides) into the argument dataclasses."""

import os

import yaml
from transformers import HfArgumentParser

from tpu_demo.compat import sampling_key
from tpu_demo.config.arguments import ARGUMENT_CLASSES, DataArguments, FineTuneConfig, LaunchArguments, numbers_typed
from tpu_demo.config.checks import check_config
from tpu_demo.errors import FineTuneError


def parse_overrides(overrides) -> dict:
    """`key=value` pairs from the command line, values typed as YAML."""
    parsed = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise FineTuneError(f"override {item!r} is not key=value")
        try:
            parsed[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:  # `sample_prompts=[S1] Hi` is meant as the text it is
            parsed[key.strip()] = value
    return parsed


def load_raw(path, overrides=()) -> dict:
    if not os.path.isfile(path):
        raise FineTuneError(f"config file {path} does not exist")
    with open(path) as f:
        try:
            raw = yaml.safe_load(f) or {}
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f", line {mark.line + 1}" if mark else ""
            raise FineTuneError(f"{path}{where}: not YAML ({getattr(error, 'problem', None) or error})") from None
    if not isinstance(raw, dict):
        raise FineTuneError(f"{path} must hold a mapping of settings")
    raw = raw | parse_overrides(overrides)
    # YAML 1.1 reads a bare `no` (and `NO`) as false
    for key, spelling in (("mixed_precision", "no"), ("eval_strategy", "no"), ("save_strategy", "no"),
                          ("sharding", "no"), ("distributed_type", "NO")):  # fmt: skip
        if raw.get(key) is False:
            raw[key] = spelling
    return sampling_key(raw)


def parse_launch(raw: dict) -> LaunchArguments:
    (launch,) = HfArgumentParser(LaunchArguments).parse_dict(numbers_typed(raw), allow_extra_keys=True)
    return launch


def parse_data(raw: dict) -> DataArguments:
    """The data settings alone, for what must be decided before `TrainingArguments` are (the Accelerator's loaders)."""
    (data,) = HfArgumentParser(DataArguments).parse_dict(numbers_typed(raw), allow_extra_keys=True)
    return data


def parse_all(raw: dict) -> FineTuneConfig:
    """Every dataclass, after `check_config` (keys none of them has, settings that contradict each other)."""
    check_config(raw)
    try:
        return FineTuneConfig(*HfArgumentParser(ARGUMENT_CLASSES).parse_dict(numbers_typed(raw)))
    except ValueError as error:  # TrainingArguments' own checks, e.g. load_best_model_at_end's strategies
        raise FineTuneError(" ".join(str(error).replace("--", "").split())) from None
