"""LoRA with PEFT: adapters only in checkpoints and final/, exact resume, merged export, generate over the base."""

import pytest

from tests.demo_utils import assert_ok, generate, losses_by_step, run_demo, summary, tiny_codec
from tests.testing_utils import bug_on_unpatched, require_dia

pytest.importorskip("peft", reason="LoRA needs PEFT (pip install peft)")
soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = [require_dia, bug_on_unpatched]  # the program stops at the state on the published release


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from transformers import DiaForConditionalGeneration

    from tpu_demo.model import tiny_config

    root = tmp_path_factory.mktemp("lora")
    DiaForConditionalGeneration(tiny_config()).save_pretrained(root / "base")
    return root / "base", tiny_codec(root / "codec")


def lora_run(out, base, *extra):
    model, codec = base
    common = ["max_steps=8", "logging_steps=1", "eval_strategy=no", "save_steps=3", "learning_rate=0.01"]
    return run_demo(out, *common, f"model={model}", f"codec={codec}", "lora_r=8", *extra, launcher=False)


def test_adapter_only_checkpoints_and_exact_resume(base, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert_ok(lora_run(straight, base))
    assert_ok(lora_run(resumed, base, "stop_after_steps=4"))
    assert_ok(lora_run(resumed, base, "resume_from_checkpoint=latest"))
    assert losses_by_step(resumed) == losses_by_step(straight)
    assert summary(straight)["last_loss"] < summary(straight)["first_loss"]
    for folder in (straight / "final", straight / "checkpoints/step-3", resumed / "checkpoints/step-4"):
        names = {p.name for p in folder.iterdir()}
        assert {"adapter_model.safetensors", "adapter_config.json"} <= names and "model.safetensors" not in names
    from safetensors.torch import load_file

    adapter = load_file(straight / "final/adapter_model.safetensors")
    assert adapter and all("lora_" in name for name in adapter)
    other = load_file(resumed / "final/adapter_model.safetensors")
    assert adapter.keys() == other.keys() and all((adapter[k] == other[k]).all() for k in adapter)

    wav = tmp_path / "said.wav"
    assert_ok(generate(straight / "final", "[S1] Hi.", "--out", wav))
    assert soundfile.info(wav).samplerate == 16000


def test_merged_export_is_base_plus_adapter_and_speaks_as_the_adapter(base, tmp_path):
    # the same run twice: its adapter, and its merged export (seeded: the training is identical)
    import torch
    from peft import PeftModel
    from transformers import DiaForConditionalGeneration

    adapter, merged = tmp_path / "adapter", tmp_path / "merged"
    assert_ok(lora_run(adapter, base, "max_steps=2", "save_strategy=no"))
    assert_ok(lora_run(merged, base, "max_steps=2", "save_strategy=no", "merge_lora=true"))
    assert (merged / "final/model.safetensors").is_file() and not (merged / "final/adapter_config.json").exists()
    reloaded, info = DiaForConditionalGeneration.from_pretrained(merged / "final", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]  # every weight read, none left random
    expected = PeftModel.from_pretrained(DiaForConditionalGeneration.from_pretrained(base[0]), adapter / "final")
    expected = expected.merge_and_unload().state_dict()
    got = reloaded.state_dict()
    assert got.keys() == expected.keys() and all(torch.allclose(got[k], expected[k], atol=1e-6) for k in got)
    greedy = ["--top_k", "1", "--guidance_scale", "1", "--temperature", "1"]
    for run in (adapter, merged):
        assert_ok(generate(run / "final", "[S1] Hi.", "--out", tmp_path / f"{run.name}.wav", *greedy))
    assert (tmp_path / "adapter.wav").read_bytes() == (tmp_path / "merged.wav").read_bytes()


def test_an_adapter_without_its_base(base, tmp_path):
    adapter = tmp_path / "adapter"
    assert_ok(lora_run(adapter, base, "max_steps=1", "save_strategy=no"))
    moved = base[0].rename(base[0].with_name("moved"))
    try:
        result = generate(adapter / "final", "x", "--out", tmp_path / "x.wav")
    finally:
        moved.rename(base[0])
    assert result.returncode == 1 and "pass --base_model" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "settings, message",
    [
        (["lora_r=4"], "lora_r: LoRA trains adapters over a base model: set `model`"),
        (["lora_alpha=4"], "lora_alpha: set, but lora_r is 0"),
        (["merge_lora=true"], "merge_lora: set, but lora_r is 0"),
    ],
)
def test_lora_settings_are_not_accepted_and_ignored(tmp_path, settings, message):
    result = run_demo(tmp_path / "run", *settings, launcher=False)
    assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr
