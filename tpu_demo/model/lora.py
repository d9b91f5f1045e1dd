"""LoRA adapters with PEFT: training wraps the model, checkpoints and `final/` hold the adapter only (through
accelerate's save/load hooks), `merge_lora` exports merged weights, and `generate` loads an adapter over its base."""

import json
from pathlib import Path

from tpu_demo.errors import LOAD_ERRORS, FineTuneError

ADAPTER_WEIGHTS = "adapter_model.safetensors"


def require_peft():
    try:
        import peft
    except ImportError:
        raise FineTuneError("lora_r: LoRA needs PEFT (pip install peft)") from None
    return peft


def lora_config(lora_args):
    peft = require_peft()
    return peft.LoraConfig(
        r=lora_args.lora_r,
        lora_alpha=lora_args.lora_alpha,
        lora_dropout=lora_args.lora_dropout,
        target_modules=list(lora_args.lora_target_modules),
    )


def wrap(model, lora_args, base_model: str):
    """The model with adapters on `lora_target_modules`; only the adapters train."""
    peft = require_peft()
    model = peft.get_peft_model(model, lora_config(lora_args))
    model.peft_config["default"].base_model_name_or_path = base_model
    return model


def is_lora(model) -> bool:
    return type(model).__module__.startswith("peft")


def adapter_saving_hook(accelerator):
    """A `save_state` pre-hook: a PEFT model is saved as its adapter (weights + adapter_config.json), by the main
    process."""

    def hook(models, weights, output_dir):
        for index in reversed(range(len(models))):
            model = accelerator.unwrap_model(models[index], keep_torch_compile=False)
            if is_lora(model):
                state = {k: v.cpu() for k, v in model.state_dict().items()}  # host tensors for safetensors (XLA)
                model.save_pretrained(output_dir, state_dict=state, is_main_process=accelerator.is_main_process)
                if weights:  # accelerate then writes no full copy (`models` is accelerate's own list: kept)
                    weights.pop(index)

    return hook


def load_adapter_weights(model, input_dir) -> None:
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    state = load_file(Path(input_dir) / ADAPTER_WEIGHTS, device="cpu")
    refusal = f"cannot resume from {input_dir}: its adapter does not fit this model (other LoRA settings?)"
    try:
        result = set_peft_model_state_dict(model, state)
    except RuntimeError as error:  # another rank: shapes differ
        raise FineTuneError(f"{refusal}: {str(error).splitlines()[0][:200]}") from None
    # the base weights are missing from any adapter; an adapter weight missing is a module the checkpoint did not train
    missing = [key for key in getattr(result, "missing_keys", []) if "lora_" in key]
    if getattr(result, "unexpected_keys", None) or missing:
        raise FineTuneError(refusal + (f": no weights for {missing[0]}" if missing else ""))


def load_adapter(adapter_dir: Path, base_model: str | None):
    """An adapter folder over its base model (`base_model`, else the one recorded in it), merged for inference."""
    from transformers import DiaForConditionalGeneration

    peft = require_peft()
    recorded = json.loads((adapter_dir / "adapter_config.json").read_text()).get("base_model_name_or_path")
    base = base_model or recorded
    if not base:
        raise FineTuneError(f"{adapter_dir} is a LoRA adapter with no base model recorded: pass --base_model")
    if not Path(base).is_dir() and not base_model:
        raise FineTuneError(f"{adapter_dir}: its base model {base} is not here: pass --base_model (the Dia it was on)")
    try:
        model = DiaForConditionalGeneration.from_pretrained(base)
    except LOAD_ERRORS as error:
        raise FineTuneError(f"base model {base}: {str(error).splitlines()[0]}") from None
    return peft.PeftModel.from_pretrained(model, adapter_dir).merge_and_unload()


def with_lora(accelerator, model, lora_args, model_args):
    """The model with LoRA adapters when `lora_r` is set (over `model_args.model`: `check_config` requires one)."""
    if not lora_args.lora_r:
        return model
    if not getattr(accelerator, "_adapter_hook", None):
        accelerator._adapter_hook = accelerator.register_save_state_pre_hook(adapter_saving_hook(accelerator))
    return wrap(model, lora_args, model_args.model)
