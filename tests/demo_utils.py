"""Runs the real fine-tune program (through its launcher, as a user does) and reads what it wrote."""

import json
import subprocess
import sys
from pathlib import Path

import torch

from tests.testing_utils import ROOT, launch_env, worker_port

CONFIG = ROOT / "tpu_demo/configs/tiny.yaml"


def run_demo(output_dir, *overrides, launcher=True, port_offset=5, timeout=900):
    output_dir = Path(output_dir)
    settings = [f"output_dir={output_dir}", "report_to=none", *overrides]
    if launcher:
        settings.append(f"main_process_port={worker_port(port_offset)}")
        cmd = [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), *settings]
    else:
        cmd = [sys.executable, "-m", "tpu_demo.train", str(CONFIG), *settings]
    return subprocess.run(cmd, env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def summary(output_dir) -> dict:
    return json.loads((Path(output_dir) / "summary.json").read_text())


def metrics(output_dir) -> list[dict]:
    return [json.loads(line) for line in (Path(output_dir) / "metrics.jsonl").read_text().splitlines()]


def losses_by_step(output_dir) -> dict[int, float]:
    return {m["step"]: m["loss"] for m in metrics(output_dir) if "loss" in m}


def assert_ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"


def assert_same_weights(model_dir, other_dir):
    from safetensors.torch import load_file

    weights, other = load_file(Path(model_dir) / "model.safetensors"), load_file(Path(other_dir) / "model.safetensors")
    assert weights.keys() == other.keys()
    for name, tensor in weights.items():
        assert torch.equal(tensor, other[name]), name


def tiny_codec(folder, n_codebooks=9) -> Path:
    """A random DacModel small enough for tests (16 kHz, hop 128), saved as a user's codec folder."""
    from transformers import DacModel

    from tpu_demo.model import tiny_codec_config

    DacModel(tiny_codec_config(n_codebooks)).save_pretrained(folder)
    return Path(folder)
