"""LoRA with PEFT: adapters only in checkpoints and final/, exact resume, merged export, generate over the base."""

from types import SimpleNamespace

import pytest

from tests.demo_utils import assert_ok, generate, losses_by_step, run_demo, summary, tiny_codec
from tests.testing_utils import bug_on_unpatched, require_dia

pytest.importorskip("peft", reason="LoRA needs PEFT (pip install peft)")
soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia
# the tests that run the program: it stops at the state on the published release (the unit tests run there too)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from transformers import DiaForConditionalGeneration

    from tpu_demo.model.dia import tiny_config

    root = tmp_path_factory.mktemp("lora")
    DiaForConditionalGeneration(tiny_config()).save_pretrained(root / "base")
    return root / "base", tiny_codec(root / "codec")


def lora_run(out, base, *extra):
    model, codec = base
    common = ["max_steps=8", "logging_steps=1", "eval_strategy=no", "save_steps=3", "learning_rate=0.01"]
    return run_demo(out, *common, f"model={model}", f"codec={codec}", "lora_r=8", *extra, launcher=False)


@bug_on_unpatched
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


@bug_on_unpatched
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


@bug_on_unpatched
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


# Unit tests of tpu_demo.model.lora: no fine-tune run, so they pass on the published release too.


def tiny_dia(seed=0):
    import torch
    from transformers import DiaForConditionalGeneration

    from tpu_demo.model.dia import tiny_config

    torch.manual_seed(seed)
    return DiaForConditionalGeneration(tiny_config())


def tiny_lora(base_model, seed=0, **settings):
    """A tiny Dia with adapters; lora_B is random (PEFT starts it at 0), so an adapter differs from a fresh one.
    `base_model` is recorded: a folder here, so PEFT's save looks for no hub repo."""
    import torch

    from tpu_demo.config.arguments import LoraArguments
    from tpu_demo.model.lora import wrap

    model = wrap(tiny_dia(seed), LoraArguments(**{"lora_r": 4, **settings}), str(base_model))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_()
    return model


def adapter_names(model) -> set[str]:
    """The names of the Linear layers that carry an adapter."""
    return {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if hasattr(module, "lora_A")}


def test_is_lora_tells_a_peft_model_from_a_plain_one(base):
    import torch

    from tpu_demo.model.lora import is_lora

    model = tiny_lora(base[0])
    assert is_lora(model) and is_lora(model.base_model)
    assert not is_lora(tiny_dia()) and not is_lora(torch.nn.Linear(2, 2))


@pytest.mark.parametrize(
    "settings, named",
    [
        ({"lora_alpha": 4}, "lora_alpha"),
        ({"lora_dropout": 0.1, "merge_lora": True}, "lora_dropout, merge_lora"),
        ({"lora_target_modules": ["q_proj"]}, "lora_target_modules"),
    ],
    ids=["alpha", "dropout_and_merge", "target_modules"],
)
def test_lora_settings_while_lora_r_is_0_are_refused_by_name(settings, named):
    from tpu_demo.config.checks import check_config
    from tpu_demo.errors import FineTuneError

    with pytest.raises(FineTuneError, match=f"^{named}: set, but lora_r is 0"):
        check_config({"model": "base/dia", **settings})


def test_without_lora_r_the_model_is_returned_as_it_is():
    from tpu_demo.config.arguments import LoraArguments, ModelArguments
    from tpu_demo.model.lora import with_lora

    model, accelerator = object(), SimpleNamespace()
    assert with_lora(accelerator, model, LoraArguments(), ModelArguments(model="base/dia")) is model
    assert vars(accelerator) == {}  # no saving hook registered


def test_lora_r_without_a_base_model_is_refused():
    # adapters over the tiny random Dia could never be loaded again: its weights are not saved anywhere
    from tpu_demo.config.checks import check_config
    from tpu_demo.errors import FineTuneError

    with pytest.raises(FineTuneError, match="lora_r: LoRA trains adapters over a base model: set `model`"):
        check_config({"lora_r": 4})


@pytest.mark.parametrize(
    "targets", [["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_up_proj", "down_proj"]], ids=["attention", "mlp"]
)
def test_wrap_trains_only_adapters_on_the_target_modules(targets):
    from tpu_demo.config.arguments import LoraArguments
    from tpu_demo.model.lora import wrap

    model = wrap(tiny_dia(), LoraArguments(lora_r=4, lora_target_modules=targets), "base/dia")
    trained = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
    assert trained and all("lora_" in name for name in trained)
    assert all(p.requires_grad for name, p in model.named_parameters() if "lora_" in name)
    assert adapter_names(model) == set(targets)
    assert all(p.shape[0] == 4 for name, p in model.named_parameters() if "lora_A" in name)  # the rank
    assert model.peft_config["default"].base_model_name_or_path == "base/dia"  # `generate` finds the base by it


def test_with_lora_registers_one_saving_hook(accelerator):
    # `with_lora` runs twice in a run with samples (the trained model and the host copy): one hook, not two
    from tpu_demo.config.arguments import LoraArguments, ModelArguments
    from tpu_demo.model.lora import is_lora, with_lora

    settings = LoraArguments(lora_r=4), ModelArguments(model="base/dia")
    assert is_lora(with_lora(accelerator, tiny_dia(), *settings))
    hook = accelerator._adapter_hook
    with_lora(accelerator, tiny_dia(), *settings)
    assert accelerator._adapter_hook is hook
    assert len(accelerator._save_model_state_pre_hook) == 1  # accelerate's own list of save hooks


@pytest.mark.parametrize("weights_given", [True, False])  # False: no state dicts (FSDP, DeepSpeed save their own)
def test_the_saving_hook_writes_the_adapter_and_takes_its_weights_from_accelerates_list(
    accelerator, base, tmp_path, weights_given
):
    import json

    import torch
    from safetensors.torch import load_file

    from tpu_demo.model.lora import ADAPTER_WEIGHTS, adapter_saving_hook

    plain, lora = torch.nn.Linear(2, 2), tiny_lora(base[0])
    models, plain_weights = [plain, lora], plain.state_dict()
    weights = [plain_weights, lora.state_dict()] if weights_given else []
    adapter_saving_hook(accelerator)(models, weights, str(tmp_path))
    assert models == [plain, lora]  # accelerate's list of models: kept
    if weights_given:  # the plain model is still saved in full, the LoRA model not
        assert len(weights) == 1 and weights[0] is plain_weights
    adapter = load_file(tmp_path / ADAPTER_WEIGHTS)
    expected = {name for name in lora.state_dict() if "lora_" in name}
    assert {name.replace(".weight", ".default.weight") for name in adapter} == expected
    assert json.loads((tmp_path / "adapter_config.json").read_text())["base_model_name_or_path"] == str(base[0])


def test_a_checkpoints_adapter_is_loaded_on_the_host(base, tmp_path):
    # the `load_state` pre-hook: a LoRA model gets its adapter and is taken off accelerate's list
    import torch

    from tpu_demo.training.checkpoint import load_model_weights_on_host

    saved, model = tiny_lora(base[0], seed=0), tiny_lora(base[0], seed=1)
    saved.save_pretrained(tmp_path)
    models = [model]
    load_model_weights_on_host(models, tmp_path)
    assert models == []
    expected = {name: tensor for name, tensor in saved.state_dict().items() if "lora_" in name}
    assert expected and all(torch.equal(model.state_dict()[name], tensor) for name, tensor in expected.items())


@pytest.mark.parametrize(
    "settings",
    [
        {"lora_r": 8},  # a RuntimeError (size mismatch) escaped
        {"lora_target_modules": ["q_proj"]},  # the adapter has modules this model does not
        {"lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "down_proj"]},  # loaded, down_proj left new
    ],
    ids=["another_rank", "fewer_modules_here", "more_modules_here"],
)
def test_an_adapter_that_does_not_fit_is_refused(base, tmp_path, settings):
    # resuming with other LoRA settings than the checkpoint's: a message, not a traceback or a partial load
    from tpu_demo.errors import FineTuneError
    from tpu_demo.model.lora import load_adapter_weights

    tiny_lora(base[0]).save_pretrained(tmp_path)
    with pytest.raises(FineTuneError, match="its adapter does not fit this model"):
        load_adapter_weights(tiny_lora(base[0], **settings), tmp_path)


@pytest.mark.parametrize(
    "recorded, message",
    [
        (None, "is a LoRA adapter with no base model recorded: pass --base_model"),
        ("/nowhere/dia", "its base model /nowhere/dia is not here: pass --base_model"),
    ],
    ids=["none_recorded", "recorded_base_missing"],
)
def test_an_adapter_without_its_base_is_refused(tmp_path, recorded, message):
    import json

    from tpu_demo.errors import FineTuneError
    from tpu_demo.model.lora import load_adapter

    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": recorded}))
    with pytest.raises(FineTuneError, match=message):
        load_adapter(tmp_path, None)


def test_a_base_model_that_does_not_load_is_named(tmp_path):
    import json

    from tpu_demo.errors import FineTuneError
    from tpu_demo.model.lora import load_adapter

    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "base/dia"}))
    (tmp_path / "empty").mkdir()  # given with --base_model, but no model in it
    with pytest.raises(FineTuneError, match=f"^base model {tmp_path / 'empty'}: "):
        load_adapter(tmp_path, str(tmp_path / "empty"))


def test_load_adapter_gives_the_base_with_the_adapter_merged(tmp_path):
    import torch

    from tpu_demo.model.lora import is_lora, load_adapter

    tiny_dia(seed=0).save_pretrained(tmp_path / "base")
    adapter = tiny_lora(tmp_path / "base", seed=0)  # over the same weights, the base recorded
    adapter.save_pretrained(tmp_path / "adapter")
    model = load_adapter(tmp_path / "adapter", None)
    assert not is_lora(model)
    expected = adapter.merge_and_unload().state_dict()
    assert model.state_dict().keys() == expected.keys()
    assert all(torch.allclose(tensor, expected[name], atol=1e-6) for name, tensor in model.state_dict().items())


@pytest.mark.parametrize("merge_lora", [False, True])
def test_save_final_writes_the_adapter_or_the_merged_model(accelerator, base, tmp_path, merge_lora):
    from safetensors.torch import load_file

    from tpu_demo.training.checkpoint import save_final

    model = tiny_lora(base[0])
    merged = set(tiny_dia().state_dict())
    save_final(accelerator, model, tmp_path, merge_lora=merge_lora)
    written = {path.name for path in tmp_path.iterdir()}
    if merge_lora:  # under the Dia's own names, loadable without PEFT
        assert "model.safetensors" in written and "adapter_config.json" not in written
        assert set(load_file(tmp_path / "model.safetensors")) <= merged
    else:
        assert {"adapter_model.safetensors", "adapter_config.json"} <= written and "model.safetensors" not in written
