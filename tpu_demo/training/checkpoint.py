"""Checkpoints: accelerate's `save_state`/`load_state`, a check that tells a corrupt checkpoint from a failing load,
and model weights read on the host (safetensors cannot load into XLA tensors in place)."""

import hashlib
import os
import shutil
import warnings
import zipfile
from pathlib import Path

import torch
from accelerate.utils import SAFE_WEIGHTS_NAME, WEIGHTS_NAME, DistributedType
from accelerate.utils.constants import FSDP_MODEL_NAME
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from tpu_demo.errors import FineTuneError
from tpu_demo.model.lora import ADAPTER_WEIGHTS, is_lora, load_adapter_weights
from tpu_demo.outputs import step_dirs, step_name
from tpu_demo.runtime.accelerator import uncompiled
from tpu_demo.runtime.spmd import host_copy

CHECKSUMS = "checksums.sha256"  # every file's sha256, as `sha256sum` writes them (`sha256sum -c` checks them)


def save_checkpoint(accelerator, model, path: Path) -> None:
    """accelerate's full training state, plus the model's config and generation config: `from_pretrained(checkpoint)`
    and `python -m tpu_demo.generate checkpoint` then work too. Written under another name and renamed once whole, so
    a save cut short (a pre-empted host, a kill) leaves no `step-N` for `latest` to pick."""
    partial = path.with_name(f".{path.name}.partial")
    if accelerator.is_main_process and partial.exists():  # left by a save cut short
        shutil.rmtree(partial)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(partial))
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).config.save_pretrained(partial)
        accelerator.unwrap_model(model).generation_config.save_pretrained(partial)
    accelerator.wait_for_everyone()
    if accelerator.is_local_main_process:  # each host its own disk's files (on a shared disk: the same list)
        write_checksums(partial)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        replace_folder(partial, path)
    accelerator.wait_for_everyone()
    if accelerator.is_local_main_process and partial.exists():  # another host, whose disk is its own
        replace_folder(partial, path)
    accelerator.wait_for_everyone()


def replace_folder(source: Path, target: Path) -> None:
    if target.exists():  # this step saved before (by a run resumed from an earlier checkpoint)
        shutil.rmtree(target)
    source.rename(target)


def sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as stream:
        while chunk := stream.read(2**24):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksums(folder: Path) -> None:
    """Only a header and a size can tell a safetensors file whole; overwritten bytes need the file's digest."""
    files = sorted(file for file in folder.rglob("*") if file.is_file() and not is_checksums(file))
    lines = "".join(f"{sha256(file)}  {file.relative_to(folder)}\n" for file in files)
    written = folder / f".{CHECKSUMS}.{os.getpid()}"  # whole or absent, also beside another host's on a shared disk
    written.write_text(lines)
    written.replace(folder / CHECKSUMS)


def is_checksums(file: Path) -> bool:
    """The list, or one being written by a host sharing the disk (renamed away at any moment)."""
    return file.name == CHECKSUMS or file.name.startswith(f".{CHECKSUMS}.")


def verify_checksums(path: Path) -> None:
    listed = path / CHECKSUMS
    if not listed.is_file():  # saved before checksums were
        return
    for line in listed.read_text(errors="replace").splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise FineTuneError(f"cannot resume from {path}: {CHECKSUMS} is corrupt (line {line[:80]!r})")
        if not (path / name).is_file():
            raise FineTuneError(f"cannot resume from {path}: {name} is missing; resume from another checkpoint")
        if sha256(path / name) != digest:
            raise FineTuneError(
                f"cannot resume from {path}: {name} is corrupt (its sha256 is not the one saved with it)"
            )


def resolve_resume(path, output_dir) -> Path:
    if path == "latest":
        found = step_dirs(Path(output_dir) / "checkpoints")
        if not found:
            raise FineTuneError(f"resume_from_checkpoint: latest, but {output_dir}/checkpoints has none")
        return found[-1]
    if not Path(path).is_dir():
        raise FineTuneError(f"resume_from_checkpoint {path} is not a checkpoint directory")
    return Path(path)


def verify_checkpoint(path: Path) -> None:
    """Every file `save_state` wrote is whole (its sha256 as saved; zip CRCs of torch files, the safetensors header
    against the file size); a checkpoint is called corrupt only here, so a load that fails later is reported as what it
    is."""
    verify_checksums(path)
    if not any((path / name).is_file() for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME, ADAPTER_WEIGHTS)) and not (
        sharded_checkpoint(path)
    ):
        raise FineTuneError(
            f"cannot resume from {path}: it has no {SAFE_WEIGHTS_NAME}, {WEIGHTS_NAME}, {ADAPTER_WEIGHTS} or "
            f"{sharded_weights(path).name}/.metadata (a sharded run's)"
        )
    for file in sorted(path.iterdir()):
        try:
            if file.suffix == ".safetensors":
                with safe_open(str(file), framework="pt") as weights:
                    for name in weights.keys():
                        weights.get_slice(name)
            elif file.suffix in (".bin", ".pkl", ".pt"):
                with zipfile.ZipFile(file) as archive:
                    bad = archive.testzip()
                if bad is not None:
                    raise ValueError(f"member {bad} fails its checksum")
        except (SafetensorError, zipfile.BadZipFile, ValueError, OSError) as error:
            raise FineTuneError(f"cannot resume from {path}: {file.name} is corrupt ({error})") from None


def load_model_weights_on_host(models, input_dir) -> None:
    """A `load_state` pre-hook: the weights are read into host memory and copied into the model, on any device
    (a LoRA model: its adapter only)."""
    for index, model in enumerate(list(models)):
        inner = getattr(model, "module", model)  # DDP
        if is_lora(inner):
            load_adapter_weights(inner, input_dir)
            models.remove(model)
            continue
        ending = f"_{index}" if index else ""
        safe = Path(input_dir) / SAFE_WEIGHTS_NAME.replace(".safetensors", f"{ending}.safetensors")
        pickled = Path(input_dir) / WEIGHTS_NAME.replace(".bin", f"{ending}.bin")
        if safe.is_file():
            state = load_file(safe, device="cpu")
        elif pickled.is_file():
            state = torch.load(pickled, map_location="cpu")
        else:  # e.g. a LoRA checkpoint (adapter only) resumed without lora_r
            raise FineTuneError(
                f"cannot resume from {input_dir}: it has no weights for this model ({safe.name} or {pickled.name}); "
                "it was saved with other settings (a LoRA checkpoint holds the adapter only: set the same lora_r)"
            )
        if not all(tensor.isfinite().all() for tensor in state.values() if tensor.is_floating_point()):
            raise FineTuneError(
                f"cannot resume from {input_dir}: its weights hold NaN or inf (the run had diverged, or the file is "
                "damaged); resume from an earlier checkpoint"
            )
        try:
            model.load_state_dict(state)
        except RuntimeError as error:  # whole files, but another model's weights
            raise FineTuneError(
                f"cannot resume from {input_dir}: its weights do not fit this model: {error}"
            ) from None
        models.remove(model)


def sharded_weights(path: Path) -> Path:
    """Where a sharded run's checkpoint keeps its weights: torch.distributed.checkpoint's parts and .metadata."""
    return Path(path) / f"{FSDP_MODEL_NAME}_0"


def sharded_checkpoint(path: Path) -> bool:
    """A sharded run's checkpoint: no whole weights file, the parts of the weights."""
    return (sharded_weights(path) / ".metadata").is_file()


def read_sharded_weights(model, path: Path) -> None:
    """The weights of sharded checkpoint `path` into a whole `model`, in one process (`generate` on a checkpoint)."""
    import torch.distributed.checkpoint as dcp

    state = {"model": model.state_dict()}  # accelerate saves the model's state under "model"
    with warnings.catch_warnings():  # "torch.distributed is disabled ...: assuming ... a single process": it is
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, checkpoint_id=str(sharded_weights(path)), no_dist=True)
    model.load_state_dict(state["model"])


def load_checkpoint(accelerator, path: Path) -> None:
    verify_checkpoint(path)
    # under FSDP each process reads its own part of the weights; else they are read on the host
    fsdp = accelerator.distributed_type == DistributedType.FSDP
    handle = None if fsdp else accelerator.register_load_state_pre_hook(load_model_weights_on_host)
    try:
        accelerator.load_state(str(path))
    except FileNotFoundError as error:  # deleted by hand: a save cut short leaves no checkpoint
        missing = Path(error.filename).name if error.filename else error
        message = f"cannot resume from {path}: {missing} is missing; resume from another checkpoint"
        raise FineTuneError(message) from None
    finally:
        if handle:
            handle.remove()


def load_model_weights(accelerator, model, path: Path) -> None:
    """Only the weights of checkpoint `path` into the prepared `model` (`load_best_model_at_end`): each process its
    part of a sharded checkpoint, else read on the host."""
    if accelerator.distributed_type == DistributedType.FSDP:
        from accelerate.utils import load_fsdp_model

        load_fsdp_model(accelerator.state.fsdp_plugin, accelerator, model, str(path))
    else:
        load_model_weights_on_host([accelerator.unwrap_model(model, keep_torch_compile=False)], path)


def rotate_checkpoints(output_dir, limit, keep=None) -> None:
    """`save_total_limit`: only the newest `limit` checkpoints are kept. The step `keep` (the best one) counts among
    them and is kept too, as is the newest (to resume from), as the Trainer does with `load_best_model_at_end`."""
    found = step_dirs(Path(output_dir) / "checkpoints")
    others = [path for path in found if path.name != step_name(keep)]
    newest = max(1, limit - (len(others) < len(found)))
    for old in others[: max(0, len(others) - newest)]:
        shutil.rmtree(old)


def save_final(accelerator, model, path: Path, merge_lora: bool = False) -> None:
    """Every process takes part in collecting the weights (a collective under FSDP/DeepSpeed); only the main process
    copies them to the host (safetensors needs host tensors, XLA's have no storage) and writes them. A LoRA model is
    written as its adapter, or with `merge_lora` as the merged model."""
    model = uncompiled(model)
    unwrapped = accelerator.unwrap_model(model)
    if is_lora(unwrapped):
        # the adapter's weights, or the merged model's under its own names (not the PEFT wrapper's `base_model.`)
        unwrapped = unwrapped.merge_and_unload() if merge_lora else unwrapped
        state_dict = unwrapped.state_dict()
    else:
        state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        unwrapped.save_pretrained(path, state_dict=host_copy(state_dict))
    del state_dict
    accelerator.wait_for_everyone()
