"""Sample health: the checks that tell a broken sample without listening (no EOS, silence, a duration out of the
training data's range, a stuck code frame), logged during training and said by `generate`."""

import json
import math

import pytest
import torch

from tests.demo_utils import assert_ok, run_main, summary
from tests.testing_utils import bug_on_unpatched, require_dia

pytestmark = require_dia
RATE, FRAME_RATE = 16000, 125.0  # the tiny codec: 16 kHz, hop 128


def tone(seconds, amplitude=0.5):
    t = torch.arange(int(RATE * seconds)) / RATE
    return amplitude * torch.sin(2 * math.pi * 220 * t)


def row(frames, eos=True, channels=9):
    """A generated row as `generate` returns it: BOS, codes, then EOS and padding (or none: the limit was hit)."""
    codes = torch.randint(0, 1024, (frames, channels), generator=torch.Generator().manual_seed(frames))
    tail = torch.tensor([[1024] * channels, [1025] * channels]) if eos else torch.empty(0, channels, dtype=torch.long)
    return torch.cat([torch.full((1, channels), 1026), codes, tail]), codes


def test_silence_share_and_repeats():
    from tpu_demo.evaluation.sample_health import longest_repeat, silence_share, spoken_characters

    assert silence_share(torch.zeros(RATE), RATE) == 1.0 and silence_share(tone(1.0), RATE) == 0.0
    half = torch.cat([tone(0.5), torch.zeros(RATE // 2)])
    assert silence_share(half, RATE) == pytest.approx(0.5, abs=0.03)
    codes = torch.tensor([[1, 2], [3, 4], [3, 4], [3, 4], [5, 6]])
    assert longest_repeat(codes) == 3 and longest_repeat(codes[:1]) == 1
    assert spoken_characters("[S1] Hi. [S2] Yo!") == len("Hi. [S2] Yo!".replace("[S2] ", ""))


@pytest.mark.parametrize(
    "case, problem",
    [
        ("healthy", None),
        ("no_eos", "no EOS (ran to the length limit)"),
        ("forced_eos", "no EOS (ran to the length limit)"),  # transformers forces EOS at the limit: it was missed
        ("silent", "silent"),
        ("empty", "empty"),
        ("too_long", "s per character, outside the training data's"),
        ("stuck", "one code frame repeated for"),
    ],
)
def test_each_problem_is_named(case, problem):
    from tpu_demo.evaluation.sample_health import sample_health

    text = "[S1] Hello there."  # 12 spoken characters: 0.6 s is 0.05 s a character
    generated, spoken = row(75, eos=case != "no_eos")
    audio = {"silent": torch.zeros(int(0.6 * RATE)), "empty": torch.zeros(0), "too_long": tone(6.0)}.get(
        case, tone(0.6)
    )
    if case == "stuck":
        spoken = spoken[:1].repeat(150, 1)  # 1.2 s of one frame
    limit = len(spoken) if case == "forced_eos" else len(spoken) + 1
    health = sample_health(generated, spoken, audio, text, RATE, FRAME_RATE, (0.04, 0.08), limit)
    assert health["eos"] == (case not in ("no_eos", "forced_eos"))
    assert health["duration_s"] == pytest.approx(len(audio) / RATE)
    if problem is None:
        assert health["problems"] == []
    else:
        assert len(health["problems"]) == 1 and problem in health["problems"][0], health["problems"]


def test_the_training_data_range_is_its_percentiles(tmp_path):
    from tpu_demo.evaluation.sample_health import data_seconds_per_char

    dataset = [{"text": "[S1] " + "a" * n, "codes": torch.zeros(n * 10, 9)} for n in range(1, 41)]
    dataset.append({"text": "", "codes": torch.zeros(500, 9)})  # text dropped: not counted
    low, high = data_seconds_per_char(dataset, frame_rate=100.0)
    assert low == pytest.approx(0.1) and high == pytest.approx(0.1)  # 10 frames a character, 100 frames a second
    assert data_seconds_per_char([], 100.0) is None


@bug_on_unpatched
@pytest.mark.xdist_group("two_process_run")
def test_training_logs_each_samples_health(two_process_run):
    pytest.importorskip("soundfile")
    out, result = two_process_run
    assert_ok(result)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logged = {line["step"]: line for line in lines if "sample/prompt-1/eos" in line}
    assert sorted(logged) == [2, 4]
    for line in logged.values():
        for number in (1, 2):
            assert {f"sample/prompt-{number}/{key}" for key in ("eos", "duration_s", "silence_share", "rms")} <= set(
                line
            )
    health = summary(out)["sample_health"]
    assert [h["file"] for h in health] == ["samples/step-4/prompt-1.wav", "samples/step-4/prompt-2.wav"]
    low, high = summary(out)["data_seconds_per_char"]
    assert 0 < low <= high
    for entry, number in zip(health, (1, 2), strict=True):
        assert entry["duration_s"] == pytest.approx(logged[4][f"sample/prompt-{number}/duration_s"])


@bug_on_unpatched
@pytest.mark.xdist_group("two_process_run")
def test_generate_warns_about_a_broken_result(two_process_run, tmp_path):
    from tpu_demo.generate import main

    out, result = two_process_run
    assert_ok(result)
    wav = tmp_path / "short.wav"
    cut_off = run_main(main, [out / "final", "[S1] Hello there.", "--out", wav, "--max_new_tokens", "2"])
    assert_ok(cut_off)  # written, and said to look broken
    assert (
        wav.is_file() and f"tpu_demo: warning: {wav} looks broken: no EOS (ran to the length limit)" in cut_off.stderr
    )


@pytest.mark.parametrize("frames", ["0", "-3"])
def test_a_length_limit_below_one_frame_is_a_usage_error(frames, tmp_path):
    from tpu_demo.generate import main

    result = run_main(main, [tmp_path, "[S1] Hi.", "--max_new_tokens", frames])
    assert result.returncode == 2 and "is not a positive number of frames" in result.stderr


@bug_on_unpatched
@pytest.mark.xdist_group("two_process_run")
def test_generate_on_a_folder_of_another_model_names_it(two_process_run, tmp_path):
    # a processor folder of another kind (here a speech recogniser's) ended in a TypeError traceback
    from tests.demo_utils import tiny_asr
    from tpu_demo.generate import main

    out, result = two_process_run
    assert_ok(result)
    asr = tiny_asr(tmp_path / "asr")
    refused = run_main(main, [out / "final", "[S1] Hi.", "--processor", asr, "--out", tmp_path / "x.wav"])
    assert refused.returncode == 1 and "no DiaProcessor" in refused.stderr and "Traceback" not in refused.stderr
