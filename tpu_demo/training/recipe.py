"""The Dia fine-tune as a recipe: `setup()` builds the run from the config, `train()` runs the loop, `evaluate()` and
`save_checkpoint()` serve it, `finish()` writes `final/` and the summary, `cleanup()` ends the trackers.

    run = DiaFineTune(load_raw(config_file, overrides))
    run.setup()
    run.train()
    summary = run.finish()
    run.cleanup()
"""

import contextlib
import json
import math
import time
from pathlib import Path

import torch
from accelerate.scheduler import AcceleratedScheduler
from accelerate.utils import DistributedType, set_seed
from tqdm.auto import tqdm

from tpu_demo.cli import PREFIX
from tpu_demo.compat import (
    asks_activation_checkpointing,
    enable_activation_checkpointing,
    name_input_embeddings,
    pads_batches_to_their_longest,
)
from tpu_demo.config.checks import best_model_metric, spoken_held_out, train_sampling
from tpu_demo.data.batching import LengthGroupedSampler, code_frames
from tpu_demo.data.codes import AudioPrompts, DiaCollator, enough_for_a_step, split
from tpu_demo.data.training_set import training_data
from tpu_demo.errors import FineTuneError
from tpu_demo.evaluation.sample_health import data_seconds_per_char
from tpu_demo.evaluation.samples import sample_writer
from tpu_demo.model.dia import build_model, checkpoint_layers_on_xla, register_static_mask_attention
from tpu_demo.model.flops import ModelFlops
from tpu_demo.model.lora import with_lora
from tpu_demo.model.processor import save_processor
from tpu_demo.outputs import checkpoint_dir, run_settings, settings_path, step_dirs
from tpu_demo.runtime.accelerator import ComputeDtype, expose_xla_loader_dataset, forward_precision, make_accelerator
from tpu_demo.runtime.peaks import device_name, peak_tflops
from tpu_demo.runtime.xla_counters import XlaCounters
from tpu_demo.segmenting.settings import check_segmented
from tpu_demo.training.best_model import BestModel
from tpu_demo.training.checkpoint import (
    load_checkpoint,
    load_model_weights,
    resolve_resume,
    rotate_checkpoints,
    save_checkpoint,
    save_final,
)
from tpu_demo.training.loop import Progress, refuse_an_earlier_run, steps_apart, train_step
from tpu_demo.training.loss import CodebookLoss
from tpu_demo.training.metrics import MetricsLog
from tpu_demo.training.optimization import init_optimizer_state, make_optimizer, make_scheduler
from tpu_demo.training.step_stats import StepStats
from tpu_demo.training.summary import closing_lines, run_summary


class DiaFineTune:
    def __init__(self, raw: dict):
        self.raw = raw  # the YAML's settings with the command line's overrides
        self.history = []  # the losses logged, for the summary
        self.saved_at = None  # the step last saved at: the same on every process, unlike a folder on a shared disk
        self.interrupted = self.stopped_early = False

    # setup: the order below is the order random numbers are drawn in; a resumed run depends on it

    def setup(self) -> None:
        self.accelerator, self.config, self.spmd = make_accelerator(self.raw)
        args = self.config.training
        set_seed(args.seed)
        self.progress = Progress(self._best_model())
        self.transcriber, self.voices = self._setup_scorers()  # before the data: a wrong setting is told at once
        self.output_dir = Path(args.output_dir)
        if not args.resume_from_checkpoint:
            refuse_an_earlier_run(self.output_dir)
        created = [folder for folder in (self.output_dir, *self.output_dir.parents) if not folder.exists()]
        self.output_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._setup_run(args)
        except FineTuneError:
            for folder in created:  # refused before it wrote anything: no empty folder left (rmdir takes empty ones)
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise

    def _setup_run(self, args) -> None:
        self.on_xla = self.accelerator.distributed_type == DistributedType.XLA
        self.sharded = self.accelerator.distributed_type == DistributedType.FSDP
        self.devices = self.spmd.devices if self.spmd else 1  # that this process drives; one loader feeds them all
        self.replicas = self.accelerator.num_processes * self.devices  # data-parallel ways
        self.metrics = MetricsLog(self.accelerator, self.output_dir)
        self._setup_model()
        self._setup_data()
        self._setup_optimization()
        self._prepare()
        if args.resume_from_checkpoint:
            self._resume(args.resume_from_checkpoint)

    def _best_model(self) -> BestModel:
        args, evaluation = self.config.training, self.config.evaluation
        metric = best_model_metric(self.config)
        greater = args.greater_is_better
        if metric and metric.endswith(("cer", "wer")) and "greater_is_better" not in self.raw:
            greater = False  # TrainingArguments takes every name not ending in "loss" for higher is better
        patience, threshold = evaluation.early_stopping_patience, evaluation.early_stopping_threshold
        return BestModel(metric, greater, patience, threshold)

    def _setup_scorers(self):
        """The speech recogniser (`eval_asr_model`) and the speaker-verification model (`eval_speaker_model`)."""
        from tpu_demo.evaluation.intelligibility import Transcriber
        from tpu_demo.evaluation.voice import Voices

        evaluation = self.config.evaluation
        transcriber = Transcriber(evaluation.eval_asr_model) if evaluation.eval_asr_model else None
        return transcriber, Voices(evaluation.eval_speaker_model) if evaluation.eval_speaker_model else None

    def _setup_model(self) -> None:
        config, accelerator = self.config, self.accelerator
        attention = register_static_mask_attention() if self.on_xla else None
        model = build_model(config.model, attn_implementation=attention)
        if asks_activation_checkpointing(config.training):
            if self.on_xla:
                checkpoint_layers_on_xla(model)
            else:
                enable_activation_checkpointing(model)
        self.model = with_lora(accelerator, model, config.lora, config.model)
        self.model_flops = ModelFlops(self.model, lora=bool(config.lora.lora_r))  # before sharding: whole weights
        if self.spmd:
            self.model = self.spmd.shard_model(self.model, accelerator.device)

    def _setup_data(self) -> None:
        config, accelerator, args = self.config, self.accelerator, self.config.training
        model_config = self.model.config
        if config.recordings.recordings:
            check_segmented(config)
        self.dataset = training_data(config.data, model_config, self.output_dir, args.seed, config.model.model)
        channels = model_config.decoder_config.num_channels
        self.loss_fn = CodebookLoss(channels, config.loss.codebook_weights, config.loss.loss_on_audio_tokens_only)
        if config.data.codec:  # for samples, and for `tpu_demo.generate` on a checkpoint
            if accelerator.is_main_process:
                save_processor(config.data.codec, self.output_dir / "processor")
            accelerator.wait_for_everyone()
        self._setup_samples()
        train_indices, eval_indices = self._split()
        self._setup_loaders(train_indices, eval_indices)

    def _setup_samples(self) -> None:
        config, accelerator, args = self.config, self.accelerator, self.config.training
        self.samples = sample_writer(
            accelerator, config.samples, config.data, self.model.config, self.output_dir, args.seed, self.transcriber,
            self.voices,
        )  # fmt: skip
        if self.samples and (self.on_xla or (self.sharded and accelerator.is_main_process)):
            # the host copy samples are generated from (under FSDP, by the main process only) has the trained model's
            # structure; its random initialisation leaves the training's random stream where it was
            with torch.random.fork_rng(devices=[]):
                host_model = build_model(config.model)
            self.samples.host_model = with_lora(accelerator, host_model, config.lora, config.model)
        if self.samples and accelerator.is_main_process:
            extractor = self.samples.processor.feature_extractor
            frame_rate = extractor.sampling_rate / extractor.hop_length
            self.samples.seconds_per_char = data_seconds_per_char(self.dataset, frame_rate)

    def _split(self) -> tuple[list[int], list[int]]:
        """The training and evaluation clips, written to split.json, and what evaluations speak and compare with."""
        config, accelerator, args = self.config, self.accelerator, self.config.training
        items = self.dataset.items
        held_out = [i for i, item in enumerate(items) if item.get("held_out")]
        train_indices, eval_indices = split(len(self.dataset), config.data.eval_samples, args.seed, held_out)
        enough_for_a_step(len(self.dataset), len(train_indices), config.data.eval_samples, args, self.replicas)
        if accelerator.is_main_process:
            (self.output_dir / "split.json").write_text(json.dumps({"train": train_indices, "eval": eval_indices}))
            settings_path(self.output_dir).write_text(json.dumps(run_settings(config), indent=2))
        # what evaluations speak for `eval_asr_model` and `eval_speaker_model` (texts a training sample dropped are
        # no test), and whose voices the samples are compared with
        said = [i for i in eval_indices if items[i]["text"].strip()][: config.evaluation.eval_asr_samples]
        self.eval_texts, self.eval_speakers = [items[i]["text"] for i in said], [items[i].get("speaker") for i in said]
        if self.voices and accelerator.is_main_process:
            self.samples.add_reference_voices(self.dataset, eval_indices)
        return train_indices, eval_indices

    def _setup_loaders(self, train_indices: list[int], eval_indices: list[int]) -> None:
        data, args, model_config = self.config.data, self.config.training, self.model.config
        prompts = AudioPrompts(self.dataset, train_indices, data.audio_prompts, data.audio_prompt_max_frames)
        compiled = self.on_xla or args.torch_compile  # a graph compiler compiles for each shape it meets
        default_buckets = (4 if compiled else 0) if pads_batches_to_their_longest() else 1
        self.length_buckets = default_buckets if data.length_buckets is None else data.length_buckets
        shapes = (model_config.delay_pattern, data.max_text_tokens, data.max_audio_frames)
        padding = {"multiple": data.pad_to_multiple_of, "buckets": self.length_buckets}
        self.collator = DiaCollator(
            *shapes, text_dropout=data.text_dropout, seed=args.seed, prompts=prompts if data.audio_prompts else None,
            **padding,
        )  # fmt: skip
        loading = {
            "num_workers": args.dataloader_num_workers,
            "pin_memory": args.dataloader_pin_memory and self.accelerator.device.type == "cuda",  # for CUDA only
        }
        batch_size = args.per_device_train_batch_size * self.devices
        order = {"shuffle": train_sampling(args) == "random"}
        if train_sampling(args) == "group_by_length":  # clips of similar length together: a batch is padded little
            order = {"sampler": LengthGroupedSampler(code_frames(self.dataset, train_indices), batch_size, args.seed)}
        train_set, eval_set = (torch.utils.data.Subset(self.dataset, ids) for ids in (train_indices, eval_indices))
        self.train_loader = torch.utils.data.DataLoader(
            train_set, batch_size=batch_size, drop_last=True, collate_fn=self.collator, **order, **loading
        )
        self.eval_loader = torch.utils.data.DataLoader(  # evaluation never drops the text
            eval_set, batch_size=args.per_device_eval_batch_size * self.devices,
            collate_fn=DiaCollator(*shapes, 0.0, seed=0, **padding), **loading,
        )  # fmt: skip

    def _setup_optimization(self) -> None:
        accelerator, args = self.accelerator, self.config.training
        self.optimizer = make_optimizer(args, self.model, accelerator.distributed_type)
        batches = len(self.train_loader) // accelerator.num_processes  # each process's, as accelerate shards them
        steps_per_epoch = max(1, math.ceil(batches / args.gradient_accumulation_steps))  # a short last step
        self.max_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * steps_per_epoch)
        self.scheduler = make_scheduler(args, self.optimizer, self.max_steps, accelerator.num_processes)
        # as in the Trainer, these step at each evaluation, with its metric
        self.steps_on_metric = str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)) in (
            "reduce_lr_on_plateau", "greedy"
        )  # fmt: skip
        self.log_every, self.eval_every, self.save_every = (
            steps_apart(steps, self.max_steps) for steps in (args.logging_steps, args.eval_steps, args.save_steps)
        )

    def _prepare(self) -> None:
        accelerator = self.accelerator
        if self.sharded:
            name_input_embeddings(self.model)
        self.model, self.optimizer, self.train_loader, self.eval_loader, self.scheduler = accelerator.prepare(
            self.model, self.optimizer, self.train_loader, self.eval_loader, self.scheduler
        )
        init_optimizer_state(self.optimizer.optimizer)
        if self.spmd:
            self.spmd.shard_optimizer_state(self.optimizer.optimizer)
            self.spmd.shard_loaders(self.train_loader, self.eval_loader)
        if self.on_xla:
            expose_xla_loader_dataset()
        accelerator.register_for_checkpointing(self.progress)
        if not isinstance(self.scheduler, AcceleratedScheduler):  # GreedyLR: no torch scheduler, left as it is
            accelerator.register_for_checkpointing(self.scheduler)
        # The step's graph repeats with the logging period and runs one step late (at the next batch): two periods
        # and one step compile every variant. summary.json counts compilations in them apart from the rest.
        self.counters = XlaCounters(accelerator, warmup_steps=2 * self.log_every + 1)
        self.compute_dtype = ComputeDtype(accelerator.unwrap_model(self.model))

    def _resume(self, checkpoint) -> None:
        accelerator, progress = self.accelerator, self.progress
        stateful = accelerator.dataloader_config.use_stateful_dataloader
        fresh_loader_state = self.train_loader.state_dict() if stateful else None
        load_checkpoint(accelerator, resolve_resume(checkpoint, self.output_dir))
        if self.spmd:
            self.spmd.shard_optimizer_state(self.optimizer.optimizer)
        if accelerator.is_main_process:
            self.history = self.metrics.forget_after(progress.step)
        if progress.batches_in_epoch >= len(self.train_loader):  # stopped on an epoch's last batch: the next starts
            progress.epoch, progress.batches_in_epoch = progress.epoch + 1, 0
            if fresh_loader_state is not None:  # the saved position, taken one batch ahead, would replay part of it
                self.train_loader.load_state_dict(fresh_loader_state)
        accelerator.print(f"resumed at step {progress.step} (epoch {progress.epoch})")

    # the loop

    def train(self) -> None:
        accelerator, args, progress = self.accelerator, self.config.training, self.progress
        accelerator.init_trackers(
            "dia_finetune", config={"learning_rate": args.learning_rate, "max_steps": self.max_steps}
        )
        main = accelerator.is_local_main_process
        bar = tqdm(total=self.max_steps, initial=progress.step, disable=not main, desc="train")
        self.device_name = device_name(accelerator.device)  # for utilisation: its peak, where the table has it
        peak = peak_tflops(self.device_name)
        self.stats = StepStats(accelerator, self.model_flops, peak and peak * 1e12, self.replicas)
        self.seen, self.prompted = [], 0
        if progress.log_window:  # resumed between two logs
            self.stats.load_state_dict(progress.log_window)
        self.started, self.timed_from = time.perf_counter(), progress.step
        self.stopped_early = progress.best.should_stop  # a resumed run that had stopped early stays stopped
        self.model.train()
        with bar:  # closed before an error's line is printed
            while progress.step < self.max_steps and not (self.interrupted or self.stopped_early):
                self.collator.epoch = progress.epoch
                self.train_loader.set_epoch(progress.epoch)
                finished_epoch = self._train_epoch(bar)
                if finished_epoch:
                    progress.epoch, progress.batches_in_epoch = progress.epoch + 1, 0
                # the last epoch ends with training, as the Trainer ends it; an early stop ends it at once
                if finished_epoch or not (self.interrupted or self.stopped_early):
                    self._end_of_epoch()
        self.elapsed = time.perf_counter() - self.started

    def _train_epoch(self, bar) -> bool:
        """The rest of the current epoch; False when the run ended (or stopped) in it."""
        accelerator, args, progress, stats = self.accelerator, self.config.training, self.progress, self.stats
        loader = self.train_loader
        if progress.batches_in_epoch and not accelerator.dataloader_config.use_stateful_dataloader:
            loader = accelerator.skip_first_batches(self.train_loader, progress.batches_in_epoch)
            if self.spmd:  # a new XLA loader: without this its batches would arrive whole on every device
                self.spmd.shard_loaders(loader)
        per_step = None if self.steps_on_metric else self.scheduler
        graphs = []  # what the step's micro-batches compile to on XLA: a graph per shape, sync, sums and log
        for batch in loader:
            position = progress.batches_in_epoch + 1
            sync = position % args.gradient_accumulation_steps == 0 or position == len(self.train_loader)
            loss, grad_norm = train_step(
                accelerator, self.model, batch, self.optimizer, per_step, args.max_grad_norm, self.loss_fn, sync
            )
            progress.batches_in_epoch += 1
            fresh = stats.micro_batches == 0  # the first sum after a log starts from new zeros: another graph
            stats.add_micro_batch(loss, batch["labels"], batch)
            self.seen.extend(batch["index"])
            self.prompted += sum(batch["prompted"])
            shape = (batch["input_ids"].shape[1], batch["decoder_input_ids"].shape[1])
            graphs.append((*shape, sync, fresh))
            if not accelerator.sync_gradients:
                continue
            progress.step += 1
            stats.add_step(grad_norm)
            bar.update(1)
            logs = progress.step % self.log_every == 0 or progress.step == self.max_steps
            if logs:
                bar.set_postfix(loss=f"{self._log_training():.3f}")
            self.counters.mark("train", graphs=[*graphs[:-1], (*graphs[-1], logs)], shape=shape)
            graphs = []
            with stats.paused():
                self._after_step()
            if progress.best.should_stop:
                self.stopped_early = True
                best = progress.best
                accelerator.print(
                    f"{PREFIX}: stopped early at step {progress.step}: {best.key} did not improve by more than "
                    f"{best.threshold} in {best.patience} evaluations (best {best.best_metric:.4f} at step "
                    f"{best.best_step})"
                )
                return False
            if progress.step == self.config.data.stop_after_steps or progress.step >= self.max_steps:
                self.interrupted = progress.step < self.max_steps
                return False
        return True

    def _log_training(self) -> float:
        logged = self.stats.read(self.scheduler.get_last_lr()[0])  # the only host read in the loop
        if self.compute_dtype.dtype not in ("bfloat16", "float16"):  # the peaks are those of 16-bit tensor math
            logged.pop("mfu", None)
        self.history.append(logged["loss"])
        if self.counters.enabled:
            logged["compilations"] = self.counters.compilations()
        self.metrics.log(logged, self.progress.step)
        self._stop_if_diverged(logged["loss"])
        return logged["loss"]

    def _stop_if_diverged(self, loss: float) -> None:
        """A NaN or inf loss has reached the weights (only fp16's loss scaling skips such a step): stop before a
        checkpoint or final/ holds them, and before rotation deletes the good checkpoints."""
        if math.isfinite(loss) or self.accelerator.mixed_precision == "fp16":
            return
        saved = step_dirs(self.output_dir / "checkpoints")
        raise FineTuneError(
            f"the training loss is {loss} at step {self.progress.step}: the weights are no longer finite and were not "
            f"saved; resume from a checkpoint before it with a lower learning_rate (newest: "
            f"{saved[-1] if saved else 'none'})"
        )

    def _after_step(self) -> None:
        """What the strategies ask for at this step: evaluation, samples, a checkpoint (last: a run resumed from it
        has done all the step asked for)."""
        args, step, sample_every = self.config.training, self.progress.step, self.config.samples.sample_every
        if args.eval_strategy == "steps" and self.eval_every and step % self.eval_every == 0:
            self._evaluate_and_log()
        if self.samples and sample_every and step % sample_every == 0:
            self._write_samples()
        if args.save_strategy == "steps" and self.save_every and step % self.save_every == 0:
            self.save_checkpoint()

    def _write_samples(self, step=None) -> None:
        """The samples of the model as it is at `step` (default: now)."""
        step = self.progress.step if step is None else step
        health = self.samples.write(self.accelerator, self.model, step)
        if health:  # the main process's
            self.metrics.log(health, step)
        self.counters.mark("samples")

    def _end_of_epoch(self) -> None:
        args = self.config.training
        if args.eval_strategy == "epoch":
            self._evaluate_and_log()
        if args.save_strategy == "epoch" and self.saved_at != self.progress.step:
            self.save_checkpoint()

    # evaluation and saving

    def evaluate(self) -> dict:
        """The loss on the held-out samples, each counted once over all processes."""
        accelerator, model, loader = self.accelerator, self.model, self.eval_loader
        if len(loader.dataset) == 0:  # eval_samples: 0
            return {"eval_loss": None, "eval_samples": 0, "eval_indices": []}
        model.eval()
        losses, indices = [], []
        for batch in loader:
            with torch.no_grad(), forward_precision(accelerator):
                losses.append(accelerator.gather(self.loss_fn.sample_losses(model, batch)))
            indices.append(accelerator.gather(torch.tensor(batch["index"], device=accelerator.device)))
        model.train()
        # each sample once: processes pad an uneven last batch with samples seen before. Not `gather_for_metrics`: it
        # cuts the batch it takes for the last by a flag that XLA's prefetch thread sets ahead of the loop
        first = {}  # each sample's first position
        for position, index in enumerate(torch.cat(indices).tolist()):
            first.setdefault(index, position)
        losses, indices = torch.cat(losses).cpu()[list(first.values())], list(first)
        metrics = {"eval_loss": losses.mean().item(), "eval_samples": losses.numel()}
        if spoken_held_out(self.config):
            takes = self.config.evaluation.eval_voice_takes
            metrics |= self.samples.held_out_scores(accelerator, model, self.eval_texts, self.eval_speakers, takes)
        return metrics | {"eval_indices": indices}

    def _evaluate_and_log(self) -> None:
        metrics = self.evaluate()
        if self.steps_on_metric:  # the scheduler itself: accelerate's wrapper steps it once per process
            getattr(self.scheduler, "scheduler", self.scheduler).step(metrics[self.progress.best.key or "eval_loss"])
        self.metrics.log(metrics, self.progress.step)
        self.progress.best.evaluated(metrics, self.progress.step)
        self.counters.mark("eval")

    def save_checkpoint(self) -> None:
        args = self.config.training
        self.progress.log_window = self.stats.state_dict()
        if self.progress.log_window["micro_batches"]:
            self._stop_if_diverged(self.progress.log_window["loss"])
        self.saved_at = self.progress.step
        self.progress.best.saved(self.progress.step)  # before saving: the checkpoint carries it
        save_checkpoint(self.accelerator, self.model, checkpoint_dir(self.output_dir, self.progress.step))
        if args.save_total_limit and self.accelerator.is_main_process:
            keep = self.progress.best.best_checkpoint() if args.load_best_model_at_end else None
            rotate_checkpoints(self.output_dir, args.save_total_limit, keep)
        self.counters.mark("save", graphs=[("save",)])  # keyed: a save after an evaluation warms up once of its own

    def finish(self) -> dict:
        """After the loop: a checkpoint if it stopped early, the last evaluation, samples and `final/` if it ended,
        and the summary."""
        accelerator, config, step = self.accelerator, self.config, self.progress.step
        if self.interrupted and self.saved_at != step:
            self.save_checkpoint()
        self.final_step = step
        if config.training.load_best_model_at_end and not self.interrupted:
            self._load_best_model()
        final_eval = self.evaluate()
        self.counters.mark("eval")
        accelerator.wait_for_everyone()  # every process reaches it; only the main process writes below
        sample_every = config.samples.sample_every
        if self.samples and not self.interrupted and not (sample_every and self.final_step % sample_every == 0):
            self._write_samples(self.final_step)  # and at the end, of the model final/ holds
        if not self.interrupted:
            save_final(accelerator, self.model, self.output_dir / "final", merge_lora=config.lora.merge_lora)
            if config.data.codec and accelerator.is_main_process:  # the processor that turns its codes into audio
                save_processor(config.data.codec, self.output_dir / "final")
            self.counters.mark("final_save")
        (self.output_dir / f"seen_rank{accelerator.process_index}.json").write_text(json.dumps(self.seen))
        summary = run_summary(self, final_eval, self.elapsed)
        if accelerator.is_main_process:
            (self.output_dir / "summary.json").write_text(json.dumps(summary, indent=2))
            accelerator.print(closing_lines(summary, self.max_steps, self.output_dir, self.config.data))
        return summary

    def _load_best_model(self) -> None:
        """`load_best_model_at_end`: the best checkpoint's weights, for the last evaluation, samples and final/."""
        best = self.progress.best.best_checkpoint()
        if best is None or best == self.progress.step:
            self.final_step = self.progress.step if best is None else best
            return
        load_model_weights(self.accelerator, self.model, checkpoint_dir(self.output_dir, best))
        self.final_step = best
        metric = f"{self.progress.best.key} {self.progress.best.checkpoints[best]:.4f}"
        self.accelerator.print(f"loaded the best model: step {best} ({metric})")

    def cleanup(self) -> None:
        # The prepared model (a DDP reducer holds the process group) goes while the group is alive: freed after it, at
        # garbage collection with the GIL held, gloo's threads waited for the GIL forever (torch 2.13, at exit)
        self.model = self.optimizer = self.scheduler = self.train_loader = self.eval_loader = None
        self.accelerator.free_memory()
        self.accelerator.end_training()
