"""What a finished (or interrupted) run reports: `summary.json` and its closing lines, built from the run's state."""

from pathlib import Path

import transformers

from tpu_demo.compat import checkpoints_activations
from tpu_demo.outputs import step_dirs
from tpu_demo.runtime.peaks import peak_tflops


def run_summary(run, final_eval: dict, elapsed: float) -> dict:
    """`run`: a `DiaFineTune` after its loop; `final_eval`: its last evaluation; `elapsed`: the loop's seconds."""
    accelerator, args, output_dir = run.accelerator, run.config.training, run.output_dir
    samples_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * run.replicas
    return {
        "device": str(accelerator.device),
        "device_name": run.device_name,
        "peak_tflops": peak_tflops(run.device_name),  # what `mfu` in metrics.jsonl divides by (16-bit, per device)
        "distributed_type": str(accelerator.distributed_type),
        "num_processes": accelerator.num_processes,
        "spmd": run.spmd.report(run.model, run.optimizer.optimizer) if run.spmd else None,
        "mixed_precision": accelerator.mixed_precision,
        "compute_dtype": run.compute_dtype.dtype,
        "gradient_checkpointing": checkpoints_activations(accelerator.unwrap_model(run.model)),
        "steps": run.progress.step,
        "interrupted": run.interrupted,
        "stopped_early": run.stopped_early,
        "best_step": run.progress.best.best_step,
        "best_metric": run.progress.best.best_metric,
        "final_model_step": None if run.interrupted else run.final_step,
        "first_loss": run.history[0] if run.history else None,
        "last_loss": run.history[-1] if run.history else None,
        "eval_loss": final_eval["eval_loss"],
        "eval_samples": final_eval["eval_samples"],
        **{
            key: final_eval.get(key)
            for key in ("eval_cer", "eval_wer", "eval_speaker_similarity", "eval_voice_stability")
        },
        "eval_unique_samples": len(set(final_eval["eval_indices"])),
        "eval_dataset_size": len(run.eval_loader.dataset),
        "train_samples_per_second": (run.progress.step - run.timed_from) * samples_per_step / elapsed,
        "samples": [str(p.relative_to(output_dir)) for p in step_dirs(output_dir / "samples")] if run.samples else [],
        "sample_health": run.samples.health if run.samples else [],  # of the samples written last
        "data_seconds_per_char": run.samples.seconds_per_char if run.samples else None,
        "transformers": transformers.__version__,
        "length_buckets": run.length_buckets,
        "xla": run.counters.summary(),
        "data": run.dataset.description,
        # of the training samples this process saw in this run, those that had an audio prompt (audio_prompts)
        "audio_prompted_share": run.prompted / len(run.seen) if run.seen else None,
    }


def loss_text(loss) -> str:
    return "n/a (no logging step reached)" if loss is None else f"{loss:.3f}"


def prompt_line(summary: dict, data) -> str:
    """With `audio_prompts`: how many training samples had one, and why none did, when none did."""
    share = summary["audio_prompted_share"]
    if not data.audio_prompts or share is None:
        return ""
    line = f"\naudio prompts: {share:.0%} of this process's training samples had one (asked: {data.audio_prompts:.0%})"
    if share == 0:
        line += (
            f"; none fitted: a prompt longer than audio_prompt_max_frames {data.audio_prompt_max_frames}, or whose "
            f"transcript with the clip's passes max_text_tokens {data.max_text_tokens}, is not used"
        )
    return line


def closing_lines(summary: dict, max_steps: int, output_dir: Path, data) -> str:
    eval_loss = "n/a" if summary["eval_loss"] is None else format(summary["eval_loss"], ".3f")
    return (
        f"{'interrupted' if summary['interrupted'] else 'done'} after {summary['steps']}/{max_steps} steps on "
        f"{summary['device']} ({summary['distributed_type']}, {summary['num_processes']} process(es)): "
        f"train loss {loss_text(summary['first_loss'])} -> {loss_text(summary['last_loss'])}, eval loss "
        f"{eval_loss} on {summary['eval_samples']} samples, {summary['train_samples_per_second']:.1f} samples/s\n"
        f"data: {summary['data']}{prompt_line(summary, data)}\n"
        f"model: {output_dir / 'final' if not summary['interrupted'] else '(not final)'}; checkpoints: "
        f"{output_dir / 'checkpoints'}; details: {output_dir / 'summary.json'}"
    )
