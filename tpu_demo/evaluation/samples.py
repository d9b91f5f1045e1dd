"""Audio samples for fixed prompts: generated with classifier-free guidance, decoded by the codec, written as WAV.

Used during training (`sample_prompts`, `sample_every`) and by `python -m tpu_demo.generate`.
"""

import os
import tempfile
from pathlib import Path

import torch

from tpu_demo.config.arguments import check_sampling
from tpu_demo.config.prompts import prompt_text
from tpu_demo.evaluation.intelligibility import error_rates
from tpu_demo.evaluation.sample_health import limit_frames, sample_health
from tpu_demo.model.tokens import AUDIO_BOS, AUDIO_PAD, CODEBOOK_SIZE
from tpu_demo.outputs import prompt_name, sample_path
from tpu_demo.runtime.spmd import host_copy

# What Dia's published generation config (nari-labs/Dia-1.6B-0626) uses; a model's own generation config wins.
DIA_SAMPLING = {"guidance_scale": 3.0, "temperature": 1.8, "top_p": 0.90, "top_k": 45}


def generation_settings(model, overrides: dict) -> dict:
    """Sampling settings: given ones, else the model's generation config, else Dia's published defaults. `top_k` 1
    is greedy decoding (the most likely code at each step, after guidance)."""
    check_sampling(overrides)
    settings = {"do_sample": True}
    for key, default in DIA_SAMPLING.items():
        own = getattr(model.generation_config, key, None)
        settings[key] = overrides.get(key) if overrides.get(key) is not None else own if own is not None else default
    if settings["top_k"] == 1:
        # Not sampling with top_k 1: transformers' guidance keeps the top_k candidates (on a trained Dia only EOS on
        # channels 1-8), its EOS filter then removes that one, and sampling meets NaN probabilities.
        return {"do_sample": False, "guidance_scale": settings["guidance_scale"]} | dict.fromkeys(
            ("temperature", "top_p", "top_k")
        )
    return settings


def generation_device():
    """The accelerator, except XLA: autoregressive decoding compiles a graph per generated token there (on PJRT CPU
    the compilations ran out of memory within 100 tokens), so the host CPU generates."""
    from accelerate import PartialState

    device = PartialState().device
    return torch.device("cpu") if device.type == "xla" else device


def write_wav(path: Path, audio, sampling_rate: int) -> None:
    """Written beside its final name and renamed into place: an interrupted write leaves no half-written WAV."""
    import soundfile

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".wav")
    os.close(handle)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(partial, 0o666 & ~umask)  # as a plain file would be: mkstemp makes it private (0600)
    try:
        soundfile.write(partial, torch.as_tensor(audio).float().cpu().numpy(), sampling_rate, format="WAV")
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


@torch.no_grad()
def generate_codes(model, processor, texts, max_new_tokens: int, settings: dict, audio_prompt=None, prompt_text=""):
    """Generated codes (batch, frames, channels, the delay reverted) and the audio prompt's length in frames (None
    without one), optionally continuing `audio_prompt` spoken as `prompt_text`."""
    device = next(model.parameters()).device
    # the processor's default max_length only warns with padding=True ("ignored"); prompts were checked against it
    padding = {"padding": True, "max_length": None, "return_tensors": "pt"}
    if audio_prompt is None:
        inputs = processor(text=texts, **padding)
    else:
        texts = [" ".join(part for part in (prompt_text, text) if part) for text in texts]
        rate = processor.feature_extractor.sampling_rate
        inputs = processor(text=texts, audio=[audio_prompt] * len(texts), sampling_rate=rate, **padding)
    inputs = {k: v.to(device) for k, v in inputs.items()}
    was_training = model.training
    model.eval()
    try:
        codes = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)
    finally:
        model.train(was_training)
    prompt_len = None
    if audio_prompt is not None:
        prompt_len = processor.get_audio_prompt_len(inputs["decoder_attention_mask"])
    return codes.cpu(), prompt_len


def generate_audio(model, processor, texts, max_new_tokens: int, settings: dict, audio_prompt=None, prompt_text=""):
    """Audio (one 1-D tensor per text) from `model`, optionally continuing `audio_prompt` spoken as `prompt_text`."""
    return [audio for audio, _ in generate_checked(model, processor, texts, max_new_tokens, settings, audio_prompt,
                                                   prompt_text)]  # fmt: skip


def generate_checked(model, processor, texts, max_new_tokens, settings, audio_prompt=None, prompt_text="",
                     seconds_per_char=None) -> list[tuple[torch.Tensor, dict]]:  # fmt: skip
    """Each text's audio and its health (`sample_health`); `seconds_per_char`: the training data's range, if known."""
    codes, prompt_len = generate_codes(model, processor, texts, max_new_tokens, settings, audio_prompt, prompt_text)
    extractor = processor.feature_extractor
    frame_rate = extractor.sampling_rate / extractor.hop_length
    delay_pattern = model.config.delay_pattern
    results = []
    for text, row in zip(texts, codes, strict=True):
        spoken = spoken_codes(row, delay_pattern, prompt_len)
        audio = decode(processor, spoken)
        limit = limit_frames(max_new_tokens, delay_pattern)
        health = sample_health(row, spoken, audio, text, extractor.sampling_rate, frame_rate, seconds_per_char, limit)
        results.append((audio, health))
    return results


def spoken_span(codes, prompt_len=None) -> tuple[int, int]:
    """Where a generated row (frames, channels) says something, as `DiaProcessor.batch_decode` cuts it: after BOS (or
    the audio prompt), up to the EOS before the padding."""
    start = prompt_len if prompt_len is not None else int((codes[:, 0] == AUDIO_BOS).sum())
    return start, len(codes) - int((codes[:, 0] == AUDIO_PAD).sum()) - 1


def spoken_codes(codes, delay_pattern, prompt_len=None) -> torch.Tensor:
    """The (frames, channels) codes a generated row (frames, channels, as `generate` returns it) says, as
    `DiaProcessor.batch_decode` cuts them for the codec: the delay reverted, after BOS (or the audio prompt), before
    EOS and the padding after it."""
    from transformers import DiaProcessor

    frames, channels = codes.shape
    start, end = spoken_span(codes, prompt_len)
    indices = DiaProcessor.build_indices(
        bsz=1, seq_len=frames, num_channels=channels, delay_pattern=delay_pattern, revert=True
    )
    reverted = DiaProcessor.apply_audio_delay(codes[None], pad_token_id=-1, bos_token_id=-1, precomputed_idx=indices)
    return reverted[0, start:end]


def decode(processor, spoken) -> torch.Tensor:
    """The audio of spoken codes (frames, channels), up to the first frame the delay left incomplete (a generation
    stopped by the length limit before the last codebooks caught up: the codec cannot decode their -1). A sequence
    that ended at once is empty audio (the codec cannot decode zero frames), which is what a listener should notice."""
    complete = ((spoken >= 0) & (spoken < CODEBOOK_SIZE)).all(-1)
    frames = int(complete.long().cumprod(0).sum())
    if frames == 0:
        return torch.zeros(0)
    codec = processor.audio_tokenizer
    with torch.no_grad():
        return codec.decode(audio_codes=spoken[:frames].T[None].to(codec.device)).audio_values.cpu().squeeze()


class SampleWriter:
    """Samples during training: on the main process only, with its own random stream (training's RNG and a resumed
    run are unaffected); on XLA from a host copy of the weights, so no XLA graph is traced for generation."""

    def __init__(self, processor, texts, output_dir, max_new_tokens: int, overrides: dict, seed: int):
        self.processor, self.texts, self.seed = processor, texts, seed
        self.output_dir, self.max_new_tokens, self.overrides = Path(output_dir), max_new_tokens, overrides
        self.host_model = None
        self.seconds_per_char = None  # the training data's range, for the health checks
        self.transcriber = None  # a Transcriber, with `eval_asr_model`
        self.voices = None  # Voices, with `eval_speaker_model` (references: the main process's)
        self.health = []  # of the samples written last

    def add_reference_voices(self, dataset, indices) -> None:
        """The voices of the held-out recordings `indices` of `dataset`, decoded from their codes. Main process."""
        rate = self.processor.feature_extractor.sampling_rate
        clips = []
        for i in indices:
            clips.append((dataset.items[i].get("speaker"), decode(self.processor, dataset[i]["codes"]), rate))
        self.voices.add_references(clips)

    def model_for_generation(self, accelerator, model):
        """The trained model (its base with adapters active, for LoRA); on XLA and under FSDP the host copy, refreshed.
        Called by every process: gathering sharded weights is a collective (None on the other processes then)."""
        from accelerate.utils import DistributedType

        from tpu_demo.runtime.accelerator import uncompiled

        model = uncompiled(model)
        unwrapped = accelerator.unwrap_model(model)
        if accelerator.distributed_type == DistributedType.FSDP:
            # whole weights on the main process's host: a sharded model generates only with every process stepping
            state_dict = accelerator.get_state_dict(model)
            if not accelerator.is_main_process:
                return None
            self.host_model.load_state_dict(state_dict)
            unwrapped = self.host_model
        elif not accelerator.is_main_process:
            return None
        elif accelerator.distributed_type == DistributedType.XLA:
            import torch_xla.core.xla_model as xm

            xm.mark_step()  # finish the step first, as save_state does: the copy then traces no graph of its own
            self.host_model.load_state_dict(host_copy(unwrapped.state_dict()))
            unwrapped = self.host_model
        return unwrapped.get_base_model() if hasattr(unwrapped, "get_base_model") else unwrapped

    def spoken(self, accelerator, generator_model, texts, seed: int) -> list[tuple[torch.Tensor, dict]]:
        """Each text's audio and health, generated with its own random stream seeded `seed`. Main process only."""
        settings = generation_settings(generator_model, self.overrides)
        cuda = [accelerator.device.index or 0] if accelerator.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            return generate_checked(
                generator_model, self.processor, texts, self.max_new_tokens, settings,
                seconds_per_char=self.seconds_per_char,
            )  # fmt: skip

    def speak(self, accelerator, generator_model, texts, seed: int, speakers=None) -> list[tuple[torch.Tensor, dict]]:
        """`spoken`, with each text's transcript and error rates when there is a transcriber, and its similarity to
        its speaker's voice (`speakers`, one per text; else the closest) when there are voices."""
        results = self.spoken(accelerator, generator_model, texts, seed)
        if self.transcriber is not None:
            rate = self.processor.feature_extractor.sampling_rate
            for text, (clip, health) in zip(texts, results, strict=True):
                health["transcript"] = self.transcriber(clip, rate)
                health |= error_rates([text], [health["transcript"]])
        if self.voices is not None:
            rate = self.processor.feature_extractor.sampling_rate
            for speaker, (clip, health) in zip(speakers or [None] * len(texts), results, strict=True):
                health["speaker_similarity"] = self.voices.similarity(clip, rate, speaker)
        return results

    def write(self, accelerator, model, step: int) -> dict:
        """Generates and writes the samples of `step` (main process); returns their health as metrics
        (`sample/prompt-N/...`), empty on the other processes."""
        metrics, self.health = {}, []
        generator_model = self.model_for_generation(accelerator, model) if self.texts else None
        if accelerator.is_main_process and self.texts:
            rate = self.processor.feature_extractor.sampling_rate
            spoken = self.speak(accelerator, generator_model, self.texts, self.seed + step)
            for number, (clip, health) in enumerate(spoken, 1):
                path = sample_path(self.output_dir, step, number)
                write_wav(path, clip, rate)
                self.health.append({"file": str(path.relative_to(self.output_dir)), **health})
                metrics |= health_metrics(f"sample/{prompt_name(number)}", health)
                if len(clip):  # trackers cannot show empty audio; the empty WAV is there to hear
                    log_audio(accelerator, f"samples/{prompt_name(number)}", clip, rate, step)
        accelerator.wait_for_everyone()  # every process reaches it: the others wait here, not in a collective
        return metrics

    def held_out_scores(self, accelerator, model, texts, speakers, voice_takes: int) -> dict:
        """The model saying held-out texts (spoken by `speakers`): `eval_cer` and `eval_wer` with a transcriber;
        `eval_speaker_similarity` (the mean) with voices, and `eval_voice_stability` of the first text spoken
        `voice_takes` times (2 or more). The same on every process: they decide the best model and early stopping."""
        from accelerate.utils import broadcast_object_list

        scores = [{}]
        generator_model = self.model_for_generation(accelerator, model)
        if accelerator.is_main_process:
            results = self.speak(accelerator, generator_model, texts, self.seed, speakers)
            if self.transcriber is not None:
                scores[0] |= error_rates(texts, [health["transcript"] for _, health in results])
            if self.voices is not None:
                similarities = [health["speaker_similarity"] for _, health in results]
                scores[0]["speaker_similarity"] = sum(similarities) / len(similarities)
            if self.voices is not None and voice_takes >= 2:
                takes = self.spoken(accelerator, generator_model, texts[:1] * voice_takes, self.seed + 1)
                rate = self.processor.feature_extractor.sampling_rate
                scores[0]["voice_stability"] = self.voices.stability([clip for clip, _ in takes], rate)
        if accelerator.num_processes > 1:
            broadcast_object_list(scores)
        return {f"eval_{name}": value for name, value in scores[0].items()}


def health_metrics(prefix: str, health: dict) -> dict:
    """A sample's health as flat metrics: numbers as floats (trackers plot them), its problems as one text."""
    metrics = {
        f"{prefix}/{key}": value if isinstance(value, str) else float(value)
        for key, value in health.items()
        if key != "problems"
    }
    return metrics | {f"{prefix}/problems": "; ".join(health["problems"])}


def log_audio(accelerator, tag, clip, sampling_rate, step) -> None:
    for tracker in accelerator.trackers:
        if tracker.name == "tensorboard":
            tracker.writer.add_audio(tag, torch.as_tensor(clip).float().reshape(1, -1), step, sampling_rate)
        elif tracker.name == "wandb":
            import wandb

            tracker.log({tag: wandb.Audio(torch.as_tensor(clip).float().numpy(), sample_rate=sampling_rate)}, step)


def sample_writer(accelerator, sample_args, data_args, model_config, output_dir, seed, transcriber=None, voices=None):
    """The `SampleWriter` for `sample_prompts` and for the held-out texts `eval_asr_model` and `eval_speaker_model`
    score, with the run's processor (output_dir/processor); None without any of them."""
    if not sample_args.sample_prompts and transcriber is None and voices is None:
        return None
    from transformers import DiaProcessor

    processor = DiaProcessor.from_pretrained(output_dir / "processor")
    texts = [prompt_text(item) for item in sample_args.sample_prompts or []]  # checked by check_config
    frames = (sample_args.sample_max_frames or data_args.max_audio_frames) + max(model_config.delay_pattern)
    writer = SampleWriter(processor, texts, output_dir, frames, sample_args.sampling_overrides(), seed)
    writer.transcriber, writer.voices = transcriber, voices
    return writer
