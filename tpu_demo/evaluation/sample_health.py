"""Cheap checks of a generated sample, so a fine-tune that got worse is noticed without listening to every WAV: did
generation end with EOS or run to its length limit, how long is it for its text (against the training data's own
range), how much of it is silence, and does it repeat one code frame.
"""

import torch

from tpu_demo.model.tokens import AUDIO_EOS, TEXT_TAGS

SILENCE_RMS = 0.01  # a window quieter than -40 dBFS is silence
WINDOW_SECONDS = 0.02
LONGEST_REPEAT_SECONDS = 1.0  # one code frame repeated this long is a stuck decoder, not speech
MOSTLY_SILENT = 0.9


def limit_frames(max_new_tokens: int, delay_pattern) -> int:
    """The frames a generation of `max_new_tokens` says when it runs to its limit (the delay's tail and EOS cut)."""
    return max_new_tokens - max(delay_pattern) - 1


def spoken_characters(text: str) -> int:
    return max(1, len(" ".join(TEXT_TAGS.sub(" ", text).split())))


def longest_repeat(codes) -> int:
    """The longest run of identical consecutive code frames (all codebooks equal), in frames."""
    if len(codes) < 2:
        return len(codes)
    same = (codes[1:] == codes[:-1]).all(-1).tolist()
    longest = run = 1
    for equal in same:
        run = run + 1 if equal else 1
        longest = max(longest, run)
    return longest


def silence_share(audio, sampling_rate: int) -> float:
    """The share of 20 ms windows quieter than -40 dBFS."""
    audio = torch.as_tensor(audio).float().flatten()
    window = max(1, int(sampling_rate * WINDOW_SECONDS))
    if len(audio) < window:
        return 1.0
    windows = audio[: len(audio) // window * window].reshape(-1, window)
    return float((windows.pow(2).mean(-1).sqrt() < SILENCE_RMS).float().mean())


def sample_health(
    generated, spoken, audio, text: str, sampling_rate: int, frame_rate: float, seconds_per_char=None, limit=None
):
    """The checks of one sample. `generated`: its row as `generate` returns it (frames, channels); `spoken`: the codes
    it says (`spoken_codes`); `audio`: the decoded waveform; `seconds_per_char`: the training data's (low, high) range
    of seconds per spoken character, if known; `limit`: the most frames generation could say (`limit_frames`).
    Returns the figures and `problems`, a list of words (empty: healthy)."""
    audio = torch.as_tensor(audio).float().flatten()
    duration = len(audio) / sampling_rate
    # transformers forces EOS as generation nears its length limit: an EOS there is the limit, not the model's
    ended = bool((torch.as_tensor(generated)[:, 0] == AUDIO_EOS).any())
    figures = {
        "eos": ended and (limit is None or len(spoken) < limit),
        "duration_s": duration,
        "seconds_per_char": duration / spoken_characters(text),
        "rms": float(audio.pow(2).mean().sqrt()) if len(audio) else 0.0,
        "silence_share": silence_share(audio, sampling_rate),
        "longest_repeat_s": longest_repeat(spoken) / frame_rate,
    }
    problems = []
    if not figures["eos"]:
        problems.append("no EOS (ran to the length limit)")
    if duration == 0 or figures["silence_share"] >= MOSTLY_SILENT:
        problems.append("silent" if duration else "empty")
    if seconds_per_char and duration:
        low, high = seconds_per_char
        if not low / 2 <= figures["seconds_per_char"] <= high * 2:
            problems.append(
                f"{figures['seconds_per_char']:.3f} s per character, outside the training data's "
                f"{low:.3f}-{high:.3f} (x2 either way)"
            )
    if figures["longest_repeat_s"] >= LONGEST_REPEAT_SECONDS:
        problems.append(f"one code frame repeated for {figures['longest_repeat_s']:.1f} s")
    return figures | {"problems": problems}


def data_seconds_per_char(dataset, frame_rate: float, limit: int = 500) -> tuple[float, float] | None:
    """The 5th and 95th percentile of seconds per spoken character over (up to `limit` of) the training samples."""
    ratios = []
    for i in range(min(len(dataset), limit)):
        sample = dataset[i]
        if sample["text"].strip():
            ratios.append(len(sample["codes"]) / frame_rate / spoken_characters(sample["text"]))
    if not ratios:
        return None
    ordered = torch.tensor(ratios).sort().values
    return float(ordered[int(0.05 * (len(ordered) - 1))]), float(ordered[int(0.95 * (len(ordered) - 1))])
