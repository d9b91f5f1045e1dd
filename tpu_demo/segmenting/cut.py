"""The cut stage: Silero VAD finds where speech is; pauses of at least `min_pause_seconds` part it into pieces."""

import numpy as np

from tpu_demo.segmenting.read import RATE


class SpeechDetector:
    """Silero VAD: the spans of a recording where someone speaks, cut at pauses of at least `min_pause_seconds`;
    speech longer than `max_seconds` is split at its longest inner pause. Its sequence model gives the streaming
    model's probabilities for each 32 ms frame, bit for bit, in one ONNX call per 16 s instead of one per frame."""

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
        return [(span["start"] / RATE, span["end"] / RATE) for span in spans]
