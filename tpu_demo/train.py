"""Fine-tunes Dia with Accelerate; run it with `python -m tpu_demo.launch CONFIG` (or `accelerate launch`).

accelerate launch -m tpu_demo.train tpu_demo/configs/tiny.yaml [key=value ...]
"""

import argparse
import contextlib
import importlib.util
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

import torch
import transformers
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, DistributedType, is_torch_xla_available, set_seed
from tqdm.auto import tqdm
from transformers import TrainingArguments

from tpu_demo.arguments import load_raw, parse_all, parse_launch, refuse_settings_while_off
from tpu_demo.checkpoint import checkpoint_dir, load_checkpoint, resolve_resume, save_checkpoint, step_dirs
from tpu_demo.data import DiaCollator
from tpu_demo.errors import FineTuneError
from tpu_demo.loss import CodebookLoss
from tpu_demo.model import (
    build_model,
    checkpoints_activations,
    enable_activation_checkpointing,
    register_static_mask_attention,
)
from tpu_demo.optimization import init_optimizer_state, make_optimizer, make_scheduler
from tpu_demo.prepare import save_processor, training_data
from tpu_demo.step_stats import StepStats
from tpu_demo.xla_counters import XlaCounters

MODEL_INPUTS = ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels")


class Progress:
    """Where training stands; saved and restored with the rest of the state by `save_state`/`load_state`.
    `log_window`: the loop's sums since its last log, so a run resumed between two logs logs what it would have."""

    def __init__(self):
        self.step, self.epoch, self.batches_in_epoch, self.log_window = 0, 0, 0, None

    def state_dict(self):
        return {
            "step": self.step,
            "epoch": self.epoch,
            "batches_in_epoch": self.batches_in_epoch,
            "log_window": self.log_window,
        }

    def load_state_dict(self, state):
        self.step, self.epoch, self.batches_in_epoch = state["step"], state["epoch"], state["batches_in_epoch"]
        self.log_window = state.get("log_window")  # absent from checkpoints of earlier versions


def use_stateful_dataloader(raw) -> bool:
    # On XLA the prepared loader is wrapped in an MpDeviceLoader, whose position accelerate does not checkpoint.
    stateful = bool(raw.get("stateful_dataloader", True)) and not is_torch_xla_available()
    return stateful and importlib.util.find_spec("torchdata") is not None


def expose_xla_loader_dataset() -> None:
    """accelerate 1.15's `save_state`/`load_state` read `.dataset` from every prepared loader; its XLA wrapper
    (`MpDeviceLoaderWrapper`) has none. Forward it to the wrapped loader."""
    from accelerate.data_loader import MpDeviceLoaderWrapper

    if not hasattr(MpDeviceLoaderWrapper, "dataset"):
        MpDeviceLoaderWrapper.dataset = property(lambda self: self._loader.dataset)


def trackers(report_to) -> list[str]:
    """`report_to` as accelerate trackers: `none`, `all` (every installed one), or names, each of which must be
    installed (accelerate would drop a missing one with a log line only)."""
    from accelerate.tracking import _available_trackers

    available = [str(getattr(t, "value", t)) for t in _available_trackers]
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if names in ([], ["none"]):
        return []
    if names == ["all"]:
        return available
    missing = [name for name in names if name not in available]
    if missing:
        raise FineTuneError(
            f"report_to: {', '.join(missing)} not installed here (pip install {' '.join(missing)}); "
            f"installed trackers: {', '.join(available) or 'none'}"
        )
    return names


def make_accelerator(raw) -> Accelerator:
    """The Accelerator comes first, from the YAML's accelerate settings: `TrainingArguments` is parsed after it."""
    launch = parse_launch(raw)
    log_with = trackers(raw.get("report_to", TrainingArguments.__dataclass_fields__["report_to"].default))
    return Accelerator(
        gradient_accumulation_steps=int(raw.get("gradient_accumulation_steps", 1)),
        mixed_precision=launch.mixed_precision,
        log_with=log_with or None,
        project_dir=raw.get("output_dir", "outputs"),
        dataloader_config=DataLoaderConfiguration(
            use_seedable_sampler=True, use_stateful_dataloader=use_stateful_dataloader(raw)
        ),
    )


def parse_after_accelerator(accelerator, raw):
    # What `accelerate launch --mixed_precision` exports; set here too so a direct run agrees with the Accelerator.
    os.environ["ACCELERATE_MIXED_PRECISION"] = accelerator.mixed_precision
    parsed = parse_all(raw)
    if not hasattr(accelerator.state, "distributed_type"):
        raise FineTuneError(
            "building TrainingArguments reset the Accelerator's state "
            f"(transformers {transformers.__version__}, huggingface/transformers#40376). Install the patched "
            "transformers (`tox -e demo` does), or keep `accelerator_state_policy: auto` and make the config's "
            "settings agree with the Accelerator's."
        )
    return parsed


def xla_bf16(accelerator) -> bool:
    return accelerator.distributed_type == DistributedType.XLA and accelerator.mixed_precision == "bf16"


def forward_precision(accelerator):
    """bf16 autocast on XLA. accelerate 1.15 autocasts there only off a TPU; on a TPU it sets XLA_USE_BF16, which
    torch_xla 2.6+ no longer reads, so training would silently stay fp32. Elsewhere accelerate's own autocast works."""
    if xla_bf16(accelerator):
        return torch.autocast("xla", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class ComputeDtype:
    """The dtype the model's first Linear layer computed in: what mixed precision really did, read from the forward
    (host-side metadata, no device sync)."""

    def __init__(self, model):
        layer = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
        self.dtype = None
        self.handle = layer.register_forward_hook(self.record)

    def record(self, module, args, output):
        self.dtype = str(output.dtype).removeprefix("torch.")
        self.handle.remove()


def train_step(accelerator, model, batch, optimizer, scheduler, max_grad_norm, loss_fn=None):
    """One micro-batch; accelerate decides when gradients sync and the optimizer really steps."""
    with accelerator.accumulate(model), forward_precision(accelerator):
        if loss_fn is None or loss_fn.is_models_own:
            loss = model(**{k: batch[k] for k in MODEL_INPUTS}).loss
        else:
            logits = model(**{k: batch[k] for k in MODEL_INPUTS if k != "labels"}).logits
            loss = loss_fn(logits, batch["labels"])
        accelerator.backward(loss)
        grad_norm = None
        if accelerator.sync_gradients:
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return loss, grad_norm


def evaluate(accelerator, model, loader, loss_fn):
    if len(loader.dataset) == 0:  # eval_samples: 0
        return {"eval_loss": None, "eval_samples": 0, "eval_indices": []}
    model.eval()
    losses, indices = [], []
    for batch in loader:
        with torch.no_grad(), forward_precision(accelerator):
            logits = model(**{k: batch[k] for k in MODEL_INPUTS}).logits
        loss = loss_fn.per_sample(logits, batch["labels"], batch["input_ids"].shape[0])
        losses.append(accelerator.gather_for_metrics(loss))
        indices.append(accelerator.gather_for_metrics(torch.tensor(batch["index"], device=accelerator.device)))
    model.train()
    losses, indices = torch.cat(losses), torch.cat(indices)
    return {"eval_loss": losses.mean().item(), "eval_samples": losses.numel(), "eval_indices": indices.tolist()}


def save_final(accelerator, model, path: Path, merge_lora: bool = False) -> None:
    """Every process takes part in collecting the weights (a collective under FSDP/DeepSpeed); only the main process
    copies them to the host (safetensors needs host tensors, XLA's have no storage) and writes them. A LoRA model is
    written as its adapter, or with `merge_lora` as the merged model."""
    from tpu_demo.lora import is_lora

    unwrapped = accelerator.unwrap_model(model)
    if is_lora(unwrapped):
        # the adapter's weights, or the merged model's under its own names (not the PEFT wrapper's `base_model.`)
        unwrapped = unwrapped.merge_and_unload() if merge_lora else unwrapped
        state_dict = unwrapped.state_dict()
    else:
        state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        unwrapped.save_pretrained(path, state_dict={k: v.cpu() for k, v in state_dict.items()})
    del state_dict
    accelerator.wait_for_everyone()


def fmt(loss) -> str:
    return "n/a (no logging step reached)" if loss is None else f"{loss:.3f}"


def log_metrics(accelerator, output_dir, metrics, step) -> None:
    accelerator.log({k: v for k, v in metrics.items() if isinstance(v, float)}, step=step)
    if accelerator.is_main_process:
        with open(Path(output_dir) / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": step, **metrics}) + "\n")


def forget_logs_after(output_dir, step) -> list[float]:
    """A resumed run runs the steps after its checkpoint again: their earlier lines leave metrics.jsonl, which then
    reads as one run (a line torn by the interruption goes too). Returns the training losses logged up to `step`."""
    path = Path(output_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    kept = []  # (line, record)
    for line in path.read_text().splitlines(keepends=True):
        with contextlib.suppress(json.JSONDecodeError):  # a torn line does not parse
            record = json.loads(line)
            if record.get("step", math.inf) <= step:
                kept.append((line, record))
    path.write_text("".join(line for line, _ in kept))
    return [record["loss"] for _, record in kept if "loss" in record]


def with_lora(accelerator, model, lora_args, model_args):
    """The model with LoRA adapters when `lora_r` is set; LoRA settings without `lora_r` are refused."""
    if not lora_args.lora_r:
        refuse_settings_while_off(lora_args, "lora_r", "lora_r is 0 (full fine-tuning)")
        return model
    if not model_args.model:
        raise FineTuneError(
            "lora_r: LoRA trains adapters over a base model: set `model` (adapters over the tiny random Dia could "
            "never be loaded again)"
        )
    from tpu_demo.lora import adapter_saving_hook, wrap

    if not getattr(accelerator, "_adapter_hook", None):
        accelerator._adapter_hook = accelerator.register_save_state_pre_hook(adapter_saving_hook(accelerator))
    return wrap(model, lora_args, model_args.model)


def sample_writer(accelerator, sample_args, data_args, model_config, output_dir, seed):
    """The `SampleWriter` for `sample_prompts`, with the run's processor (output_dir/processor); None without prompts.
    Sampling settings without prompts are refused."""
    if not sample_args.sample_prompts:
        refuse_settings_while_off(sample_args, "sample_prompts", "there are no sample_prompts to generate")
        return None
    if not data_args.codec:
        raise FineTuneError("sample_prompts: needs `codec` (the DacModel that turns generated codes into audio)")
    from transformers import DiaProcessor

    from tpu_demo.samples import SampleWriter, check_prompts

    processor = DiaProcessor.from_pretrained(output_dir / "processor")
    texts = check_prompts(sample_args.sample_prompts, processor.tokenizer, data_args.max_text_tokens)
    frames = (sample_args.sample_max_frames or data_args.max_audio_frames) + max(model_config.delay_pattern)
    return SampleWriter(processor, texts, output_dir, frames, sample_args.sampling_overrides(), seed)


def split(dataset_size: int, eval_samples: int, seed: int, held_out=()) -> tuple[list[int], list[int]]:
    """A random train/eval split, the same for the same seed (and so for a resumed run). With the data's own held-out
    samples (a test split), evaluation takes `eval_samples` of them and training every other sample."""
    order = torch.randperm(dataset_size, generator=torch.Generator().manual_seed(seed)).tolist()
    if held_out:
        held_out = set(held_out)
        chosen = [i for i in order if i in held_out][:eval_samples]
        return sorted(i for i in order if i not in held_out), sorted(chosen)
    n_eval = min(eval_samples, dataset_size - 1)
    return sorted(order[n_eval:]), sorted(order[:n_eval])


def enough_for_a_step(samples: int, train_samples: int, eval_samples: int, args, processes: int) -> None:
    """Refuses data that gives no training batch: the loop would wait for one forever."""
    needed = args.per_device_train_batch_size * processes
    if train_samples < needed:
        raise FineTuneError(
            f"{samples} samples, {samples - train_samples} held out for evaluation (eval_samples: {eval_samples}), "
            f"{train_samples} left for training; one training step needs per_device_train_batch_size "
            f"({args.per_device_train_batch_size}) x {processes} process(es) = {needed}: lower eval_samples or the "
            "batch size, or add data"
        )


def rotate_checkpoints(output_dir, limit) -> None:
    """`save_total_limit`: only the newest `limit` checkpoints are kept."""
    found = step_dirs(Path(output_dir) / "checkpoints")
    for old in found[: max(0, len(found) - limit)]:
        shutil.rmtree(old)


def train(config, overrides=()) -> dict:
    raw = load_raw(config, overrides)
    accelerator = make_accelerator(raw)
    launch_args, model_args, data_args, loss_args, sample_args, lora_args, args = parse_after_accelerator(
        accelerator, raw
    )
    set_seed(args.seed)
    if data_args.eval_samples == 0 and args.eval_strategy != "no":
        raise FineTuneError(f"eval_strategy: {args.eval_strategy.value} needs held-out samples (eval_samples: 0)")
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)

    on_xla = accelerator.distributed_type == DistributedType.XLA
    model = build_model(model_args, attn_implementation=register_static_mask_attention() if on_xla else None)
    # `activation_checkpointing` since transformers 5.23, which mirrors it onto `gradient_checkpointing` until v6
    if getattr(args, "activation_checkpointing", None) or getattr(args, "gradient_checkpointing", False):
        enable_activation_checkpointing(model)
    model = with_lora(accelerator, model, lora_args, model_args)
    dataset = training_data(data_args, model.config, output_dir, args.seed, model_args.model)
    channels = model.config.decoder_config.num_channels
    loss_fn = CodebookLoss(channels, loss_args.codebook_weights, loss_args.loss_on_audio_tokens_only)
    if data_args.codec:  # for samples, and for `tpu_demo.generate` on a checkpoint
        if accelerator.is_main_process:
            save_processor(data_args.codec, output_dir / "processor")
        accelerator.wait_for_everyone()
    samples = sample_writer(accelerator, sample_args, data_args, model.config, output_dir, args.seed)
    if samples and on_xla:  # the host copy samples are generated from has the trained model's structure
        samples.host_model = with_lora(accelerator, build_model(model_args), lora_args, model_args)
    held_out = [i for i, item in enumerate(dataset.items) if item.get("held_out")]
    train_indices, eval_indices = split(len(dataset), data_args.eval_samples, args.seed, held_out)
    enough_for_a_step(len(dataset), len(train_indices), data_args.eval_samples, args, accelerator.num_processes)
    if accelerator.is_main_process:
        (output_dir / "split.json").write_text(json.dumps({"train": train_indices, "eval": eval_indices}))
    train_set, eval_set = (torch.utils.data.Subset(dataset, ids) for ids in (train_indices, eval_indices))
    shapes = (model.config.delay_pattern, data_args.max_text_tokens, data_args.max_audio_frames)
    collator = DiaCollator(*shapes, text_dropout=data_args.text_dropout, seed=args.seed)
    loading = {
        "num_workers": args.dataloader_num_workers,
        "pin_memory": args.dataloader_pin_memory and accelerator.device.type == "cuda",  # pinning serves CUDA only
    }
    train_loader = torch.utils.data.DataLoader(
        train_set,
        batch_size=args.per_device_train_batch_size,
        shuffle=True,
        drop_last=True,
        collate_fn=collator,
        **loading,
    )
    eval_loader = torch.utils.data.DataLoader(  # evaluation never drops the text
        eval_set, batch_size=args.per_device_eval_batch_size, collate_fn=DiaCollator(*shapes, 0.0, seed=0), **loading
    )
    optimizer = make_optimizer(args, model, accelerator.distributed_type)
    steps_per_epoch = max(1, len(train_loader) // (accelerator.num_processes * args.gradient_accumulation_steps))
    max_steps = args.max_steps if args.max_steps > 0 else int(args.num_train_epochs * steps_per_epoch)
    scheduler = make_scheduler(args, optimizer, max_steps, accelerator.num_processes)
    if args.torch_compile and not on_xla:
        model = torch.compile(model)
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )
    init_optimizer_state(optimizer.optimizer)
    if on_xla:
        expose_xla_loader_dataset()
    progress, history = Progress(), []  # history: the losses logged, for the summary
    accelerator.register_for_checkpointing(progress)
    # The step's graph repeats with the logging period and runs one step late (at the next batch): two periods and one
    # step compile every variant. summary.json counts compilations in them apart from the rest.
    counters = XlaCounters(accelerator, warmup_steps=2 * args.logging_steps + 1)
    compute_dtype = ComputeDtype(accelerator.unwrap_model(model))
    if args.resume_from_checkpoint:
        stateful = accelerator.dataloader_config.use_stateful_dataloader
        fresh_loader_state = train_loader.state_dict() if stateful else None
        load_checkpoint(accelerator, resolve_resume(args.resume_from_checkpoint, output_dir))
        if accelerator.is_main_process:
            history = forget_logs_after(output_dir, progress.step)
        if progress.batches_in_epoch >= len(train_loader):  # interrupted on an epoch's last batch: the next one starts
            progress.epoch, progress.batches_in_epoch = progress.epoch + 1, 0
            if fresh_loader_state is not None:  # the saved position, taken one batch ahead, would replay part of it
                train_loader.load_state_dict(fresh_loader_state)
        accelerator.print(f"resumed at step {progress.step} (epoch {progress.epoch})")

    def evaluate_and_log():
        log_metrics(accelerator, output_dir, evaluate(accelerator, model, eval_loader, loss_fn), progress.step)
        counters.mark("eval")

    saved_at = None  # the step the loop last saved at: the same on every process, unlike a folder on a shared disk

    def save():
        nonlocal saved_at
        saved_at = progress.step
        progress.log_window = stats.state_dict()
        save_checkpoint(accelerator, model, checkpoint_dir(output_dir, progress.step))
        if args.save_total_limit and accelerator.is_main_process:
            rotate_checkpoints(output_dir, args.save_total_limit)
        counters.mark("save")

    def end_of_epoch():
        if args.eval_strategy == "epoch":
            evaluate_and_log()
        if args.save_strategy == "epoch" and saved_at != progress.step:
            save()

    accelerator.init_trackers("dia_finetune", config={"learning_rate": args.learning_rate, "max_steps": max_steps})
    bar = tqdm(total=max_steps, initial=progress.step, disable=not accelerator.is_local_main_process, desc="train")
    stats, seen = StepStats(accelerator), []
    if progress.log_window:  # resumed between two logs
        stats.load_state_dict(progress.log_window)
    interrupted, started, timed_from = False, time.perf_counter(), progress.step

    model.train()
    while progress.step < max_steps and not interrupted:
        collator.epoch = progress.epoch
        train_loader.set_epoch(progress.epoch)
        loader = train_loader
        if progress.batches_in_epoch and not accelerator.dataloader_config.use_stateful_dataloader:
            loader = accelerator.skip_first_batches(train_loader, progress.batches_in_epoch)
        for batch in loader:
            loss, grad_norm = train_step(accelerator, model, batch, optimizer, scheduler, args.max_grad_norm, loss_fn)
            progress.batches_in_epoch += 1
            stats.add_micro_batch(loss, batch["labels"])
            seen.extend(batch["index"])
            if not accelerator.sync_gradients:
                continue
            progress.step += 1
            stats.add_step(grad_norm)
            bar.update(1)
            if progress.step % args.logging_steps == 0 or progress.step == max_steps:
                logged = stats.read(scheduler.get_last_lr()[0])  # the only host read in the loop
                history.append(logged["loss"])
                if counters.enabled:
                    logged["compilations"] = counters.compilations()
                log_metrics(accelerator, output_dir, logged, progress.step)
                bar.set_postfix(loss=f"{logged['loss']:.3f}")
            counters.mark("train")
            if args.eval_strategy == "steps" and args.eval_steps and progress.step % int(args.eval_steps) == 0:
                evaluate_and_log()
            if args.save_strategy == "steps" and args.save_steps and progress.step % int(args.save_steps) == 0:
                save()
            if samples and sample_args.sample_every and progress.step % sample_args.sample_every == 0:
                samples.write(accelerator, model, progress.step)
                counters.mark("samples")
            if progress.step == data_args.stop_after_steps or progress.step >= max_steps:
                interrupted = progress.step < max_steps
                break
        else:
            progress.epoch, progress.batches_in_epoch = progress.epoch + 1, 0
            end_of_epoch()
            continue
        if not interrupted:  # the last epoch ends with training, as the Trainer ends it
            end_of_epoch()
    bar.close()
    elapsed = time.perf_counter() - started

    if interrupted and saved_at != progress.step:
        save()
    final = evaluate(accelerator, model, eval_loader, loss_fn)
    counters.mark("eval")
    accelerator.wait_for_everyone()  # every process reaches it; only the main process writes below
    if samples and not interrupted and not (sample_args.sample_every and max_steps % sample_args.sample_every == 0):
        samples.write(accelerator, model, progress.step)  # and at the end
        counters.mark("samples")
    if not interrupted:
        save_final(accelerator, model, output_dir / "final", merge_lora=lora_args.merge_lora)
        if data_args.codec and accelerator.is_main_process:  # the processor that turns its codes into audio
            save_processor(data_args.codec, output_dir / "final")
        counters.mark("final_save")
    (output_dir / f"seen_rank{accelerator.process_index}.json").write_text(json.dumps(seen))
    summary = {
        "device": str(accelerator.device),
        "distributed_type": str(accelerator.distributed_type),
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        "compute_dtype": compute_dtype.dtype,
        "gradient_checkpointing": checkpoints_activations(accelerator.unwrap_model(model)),
        "steps": progress.step,
        "interrupted": interrupted,
        "first_loss": history[0] if history else None,
        "last_loss": history[-1] if history else None,
        "eval_loss": final["eval_loss"],
        "eval_samples": final["eval_samples"],
        "eval_unique_samples": len(set(final["eval_indices"])),
        "eval_dataset_size": len(eval_set),
        "train_samples_per_second": (progress.step - timed_from)
        * args.per_device_train_batch_size
        * args.gradient_accumulation_steps
        * accelerator.num_processes
        / elapsed,
        "samples": [str(p.relative_to(output_dir)) for p in step_dirs(output_dir / "samples")] if samples else [],
        "transformers": transformers.__version__,
        "xla": counters.summary(),
        "data": dataset.description,
    }
    if accelerator.is_main_process:
        (output_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        accelerator.print(
            f"{'interrupted' if interrupted else 'done'} after {progress.step}/{max_steps} steps on "
            f"{summary['device']} ({summary['distributed_type']}, {summary['num_processes']} process(es)): "
            f"train loss {fmt(summary['first_loss'])} -> {fmt(summary['last_loss'])}, eval loss "
            f"{'n/a' if summary['eval_loss'] is None else format(summary['eval_loss'], '.3f')} on "
            f"{summary['eval_samples']} samples, "
            f"{summary['train_samples_per_second']:.1f} samples/s\n"
            f"data: {dataset.description}\n"
            f"model: {output_dir / 'final' if not interrupted else '(not final)'}; checkpoints: "
            f"{output_dir / 'checkpoints'}; details: {output_dir / 'summary.json'}"
        )
    accelerator.end_training()
    return summary


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="tpu_demo.train", description="Fine-tune Dia with Accelerate.")
    parser.add_argument("config", help="YAML file with training and accelerate settings")
    parser.add_argument("overrides", nargs="*", help="key=value settings that replace the file's")
    args = parser.parse_args(argv)
    try:
        train(args.config, args.overrides)
    except FineTuneError as error:
        sys.exit(f"tpu_demo: {error}")
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the run: one says what to do
        if os.environ.get("RANK", "0") == "0":
            print(
                "tpu_demo: interrupted; the same command with resume_from_checkpoint=latest continues from the run's "
                "newest checkpoint",
                file=sys.stderr,
            )
        sys.exit(130)  # a shell's code for Ctrl-C


if __name__ == "__main__":
    main()
