"""Recordings without a transcript, segmented on N processes: the time per stage of the path that transcribes (the
recogniser, DNSMOS, the voice) and the speed, wall and per core.

Short recordings (two sentences each, 4-9 s) of six voices (espeak-ng's and, where installed, flite's), a folder per
voice and no NAME.txt, as a podcast cut into takes is; the segmenter runs as a user runs it (`accelerate launch` of
`--processes` CPU processes, offline, a thread each). It prints the wall time against the audio, and each stage's
seconds as the report's seconds_by_stage adds them up over the processes.

    python benchmarks/segment_no_transcript.py [--recordings 60] [--processes 2] [--out DIR] [--keep]
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.segment_faults import segmented_report, stages, work_folder  # noqa: E402
from tests import planted_faults  # noqa: E402

VOICES = ("en-us", "en+f3", "en-029", "en+m3", "flite:slt", "flite:rms")


def build(work: Path, recordings: int, processes: int) -> tuple[float, Path, Path]:
    import soundfile

    voices = [voice for voice in VOICES if not voice.startswith("flite:") or shutil.which("flite")]
    folder, seconds = work / "recordings", 0.0
    for number in range(recordings):
        voice = voices[number % len(voices)]
        texts = [planted_faults.SENTENCES[(2 * number + k) % len(planted_faults.SENTENCES)] for k in range(2)]
        samples, _ = planted_faults.talk(texts, voice, 16000, seed=number, lead=0.3)
        path = folder / voice.replace(":", "-").replace("+", "-") / f"take{number:03d}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(path), samples, 16000)
        seconds += len(samples) / 16000
    config = work / "segment.yaml"
    config.write_text(f"recordings: {json.dumps(str(folder))}\ndataset: {json.dumps(str(work / 'dataset'))}\n"
                      f"segment_asr_model: pocketsphinx\nnum_processes: {processes}\n")  # fmt: skip
    return seconds, config, work / "dataset"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/segment_no_transcript.py", description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", type=int, default=60, help="recordings of 4-9 s (60: about 8 minutes)")
    parser.add_argument("--processes", type=int, default=2, help="CPU processes sharing the recordings")
    parser.add_argument("--out", help="the work folder, new or empty (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder: recordings, dataset")
    args = parser.parse_args(argv)
    with work_folder(parser, args.out, args.keep, "segment-no-transcript-") as work:
        try:
            audio_seconds, config, dataset = build(work, args.recordings, args.processes)
        except planted_faults.NoEspeak as error:
            print(f"segment_no_transcript: {error}", file=sys.stderr)
            return 1
        report, elapsed, _ = segmented_report(config, dataset, args.processes)
        if report is None:
            return 1
        review, speed = report.get("review", {}).get("clips", 0), audio_seconds / elapsed
        print(f"{args.recordings} recordings, {audio_seconds / 60:.1f} min of audio, {args.processes} processes: "
              f"{elapsed:.0f} s wall = {speed:.1f}x real time; {review} clips to review.csv")  # fmt: skip
        for line in stages(report.get("seconds_by_stage", {}), audio_seconds, args.processes):
            print(line)
        return 0


if __name__ == "__main__":
    sys.exit(main())
