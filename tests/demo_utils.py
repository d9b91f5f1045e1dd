"""Runs the real fine-tune program and reads what it wrote: through its launcher as a user does (a new interpreter
and `accelerate launch`), or its `main` in this process, for the checks that need no launcher (7 s less a run)."""

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import torch
from accelerate.state import AcceleratorState, GradientState

from tests.testing_utils import ROOT, accelerate_environment_cleared, free_ports, launch_env

CONFIG = ROOT / "tpu_demo/configs/tiny.yaml"


def run_demo(output_dir, *overrides, launcher=True, timeout=900, env=None):
    """The fine-tune on `tiny.yaml`; `launcher=False` runs `tpu_demo.train.main` in this process. `env`: variables
    the launched program gets besides `launch_env`'s."""
    settings = [f"output_dir={output_dir}", "report_to=none", *overrides]
    if not launcher:
        from tpu_demo.train import main

        return run_main(main, [str(CONFIG), *settings])
    settings.append(f"main_process_port={free_ports()[0]}")
    cmd = [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), *settings]
    env = launch_env(**(env or {}))
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def generate(*args, cli=False):
    """`python -m tpu_demo.generate` as a user runs it (`cli`), else its `main` in this process; 30 frames at most."""
    args = [*map(str, args), "--max_new_tokens", "30"]
    if cli:
        cmd = [sys.executable, "-m", "tpu_demo.generate", *args]
        return subprocess.run(cmd, env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    from tpu_demo.generate import main

    return run_main(main, args)


def run_main(main, argv) -> subprocess.CompletedProcess:
    """`main(argv)` in this process as the interpreter would run it: its exit code, and its output captured. It runs
    as `launch_env` sets a program up (one thread, no `ACCELERATE_*` variable) and leaves no accelerate state behind.
    An exception other than `SystemExit` propagates: it would be a traceback for a user."""
    stdout, stderr, threads = io.StringIO(), io.StringIO(), torch.get_num_threads()
    code = 0
    with accelerate_environment_cleared(), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        torch.set_num_threads(1)
        try:
            code = main(list(map(str, argv))) or 0
        except SystemExit as stopped:  # as the interpreter reads it: None is 0, a message is printed and is 1
            if isinstance(stopped.code, str):
                print(stopped.code, file=sys.stderr)
            code = 1 if isinstance(stopped.code, str) else stopped.code or 0
        finally:
            torch.set_num_threads(threads)
            AcceleratorState._reset_state(True)
            GradientState._reset_state()
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def summary(output_dir) -> dict:
    return json.loads((Path(output_dir) / "summary.json").read_text())


def metrics(output_dir) -> list[dict]:
    return [json.loads(line) for line in (Path(output_dir) / "metrics.jsonl").read_text().splitlines()]


def losses_by_step(output_dir) -> dict[int, float]:
    return {m["step"]: m["loss"] for m in metrics(output_dir) if "loss" in m}


def eval_losses(output_dir) -> dict[int, float]:
    return {m["step"]: m["eval_loss"] for m in metrics(output_dir) if "eval_loss" in m}


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

    from tpu_demo.model.dia import tiny_codec_config

    DacModel(tiny_codec_config(n_codebooks)).save_pretrained(folder)
    return Path(folder)


def tiny_asr(folder) -> Path:
    """A random wav2vec2 CTC speech recognizer (16 kHz, characters a-z and space), saved as a user's ASR folder: it
    transcribes nonsense, which is all the plumbing and the arithmetic need."""
    import json

    from transformers import (
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
        Wav2Vec2Processor,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<pad>": 0, "<unk>": 1, "|": 2} | {c: i + 3 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz'")}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(folder / "vocab.json"), word_delimiter_token="|")
    extractor = Wav2Vec2FeatureExtractor(sampling_rate=16000, return_attention_mask=True)
    Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(folder)
    config = Wav2Vec2Config(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        conv_dim=(8, 8), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    Wav2Vec2ForCTC(config).save_pretrained(folder)
    return folder


def tiny_whisper(folder) -> Path:
    """A random Whisper (80 mel bins, one layer each side) with a character vocabulary and Whisper's special tokens,
    saved as a user's ASR folder: it transcribes nonsense, in English when asked, as a real Whisper's folder loads."""
    import json

    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>"]
    specials += ["<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
    characters = [chr(code) for code in range(33, 127)] + ["\u0120"]  # byte-level BPE writes a space as U+0120
    vocab = {token: number for number, token in enumerate(characters + specials)}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    end = "<|endoftext|>"
    tokenizer = WhisperTokenizer(
        str(folder / "vocab.json"), str(folder / "merges.txt"), unk_token=end, bos_token=end, eos_token=end,
        pad_token=end,
    )  # fmt: skip
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer).save_pretrained(
        folder
    )
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in specials}
    config = WhisperConfig(
        vocab_size=len(tokenizer), num_mel_bins=80, encoder_layers=1, decoder_layers=1, d_model=16,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        decoder_start_token_id=ids["<|startoftranscript|>"], eos_token_id=ids[end], pad_token_id=ids[end],
        bos_token_id=ids[end], architectures=["WhisperForConditionalGeneration"],
    )  # fmt: skip
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config)
    generation = model.generation_config
    generation.decoder_start_token_id, generation.no_timestamps_token_id = (
        config.decoder_start_token_id,
        ids[specials[-1]],
    )
    generation.lang_to_id = {"<|en|>": ids["<|en|>"]}
    generation.task_to_id = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    generation.is_multilingual, generation.max_length, generation._from_model_config = True, 24, False
    model.save_pretrained(folder)
    return folder


def tiny_speaker_model(folder) -> Path:
    """A random WavLM x-vector speaker-verification model (16 kHz), saved as a user's `eval_speaker_model` folder: its
    embeddings tell no speakers apart, which is all the plumbing and the arithmetic need."""
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMForXVector

    folder = Path(folder)
    Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(folder)
    config = WavLMConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, conv_dim=(8, 8),
        conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
        tdnn_dim=(8, 8, 8, 8, 16), tdnn_kernel=(5, 3, 3, 1, 1), tdnn_dilation=(1, 2, 3, 1, 1), xvector_output_dim=8,
        num_buckets=16, max_bucket_distance=32,
    )  # fmt: skip
    torch.manual_seed(0)
    WavLMForXVector(config).save_pretrained(folder)
    return folder
