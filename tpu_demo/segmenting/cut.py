"""The cut stage: Silero VAD finds where speech is; pauses of at least `min_pause_seconds` part it into pieces."""

import numpy as np

from tpu_demo.segmenting.read import RATE, quiet_stretches

HARD_CUT = 0.05  # seconds: spans Silero parted by less were cut at its longest speech, with no silence to cut at
SPLIT_GAP, SPLIT_DB, SPLIT_EDGE = 0.05, 30.0, 0.3  # a stretch this long and this far under the speech, from its ends


class SpeechDetector:
    """Silero VAD: the spans of a recording where someone speaks, cut at pauses of at least `min_pause_seconds`;
    speech longer than `max_seconds` is split at its longest inner pause (Silero's), and where Silero hears none, at
    its longest quiet stretches (`split_where_quiet`). Its sequence model gives the streaming model's probabilities
    for each 32 ms frame, bit for bit, in one ONNX call per 16 s instead of one per frame."""

    def __init__(self, threshold: float, min_pause_seconds: float, max_seconds: float):
        from silero_vad import load_silero_vad

        self.model = load_silero_vad(sequence=True)
        self.threshold, self.min_pause, self.max_seconds = threshold, min_pause_seconds, max_seconds

    def __call__(self, audio16k: np.ndarray) -> list[tuple[float, float]]:
        from silero_vad import get_speech_timestamps_sequence

        spans = get_speech_timestamps_sequence(
            np.ascontiguousarray(audio16k, dtype=np.float32),
            self.model,
            threshold=self.threshold,
            sampling_rate=RATE,
            min_silence_duration_ms=int(self.min_pause * 1000),
            max_speech_duration_s=self.max_seconds,
            speech_pad_ms=0,  # the segmenter keeps its own margin, bounded by the pause
            return_seconds=False,
        )
        found = [(span["start"] / RATE, span["end"] / RATE) for span in spans]
        return split_where_quiet(found, audio16k, self.max_seconds)


def split_where_quiet(spans: list[tuple[float, float]], audio16k: np.ndarray, longest: float) -> list[tuple]:
    """`spans`, those Silero cut at `longest` s without a silence (HARD_CUT: inside a word, where turns follow each
    other 60-120 ms apart and its probabilities never fall) joined again and split at their longest quiet stretches
    (SPLIT_GAP s, SPLIT_DB under their loud level), each part at most `longest` s; where one has none, Silero's
    cuts stay."""
    groups = []
    for span in spans:
        if groups and span[0] - groups[-1][-1][1] < HARD_CUT:
            groups[-1].append(span)
        else:
            groups.append([span])
    found = []
    for group in groups:
        parts = quiet_split((group[0][0], group[-1][1]), audio16k, longest) if len(group) > 1 else None
        found += parts or group
    return found


def quiet_split(span: tuple[float, float], audio16k: np.ndarray, longest: float) -> list[tuple] | None:
    """`span` split at its longest quiet stretch (the one nearest its middle of those as long), and each side so,
    until each part is at most `longest` s; None where a part too long has none."""
    start, end = span
    if end - start <= longest:
        return [span]
    stretches = quiet_stretches(audio16k, start, end, SPLIT_DB, SPLIT_GAP, SPLIT_EDGE)
    if not stretches:
        return None
    middle = (start + end) / 2
    first, last = max(stretches, key=lambda s: (round(s[1] - s[0], 2), -abs((s[0] + s[1]) / 2 - middle)))
    before, after = quiet_split((start, first), audio16k, longest), quiet_split((last, end), audio16k, longest)
    return before + after if before is not None and after is not None else None
