"""A long reading of a list-like script with its transcript: kept clips with another sentence's text, kept share, and
the time per stage (the alignment's time must grow with the recording, not faster).

Sentences of one form a number and a few words apart ("Item 42 is a red lamp with a blue cap.",
tests/planted_speech.like_sentences) read one after another by each voice given (espeak-ng's, or flite's as
"flite:slt"), one recording per voice with its script as NAME.txt; the segmenter runs on them as a user runs it (a new
interpreter, offline, one thread). It prints planted_faults' row per recording (wrong text: kept clips whose text is
not the words said in them), the totals, the time per audio hour, and each stage's seconds.

    python benchmarks/segment_long_script.py [--sentences 420] [--voices en-029,en-us-nyc] [--out DIR] [--keep]
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.segment_faults import segmented_report, stages, table, work_folder  # noqa: E402
from tests import planted_faults, planted_speech  # noqa: E402


def build(work: Path, sentences: int, voices: list[str]) -> tuple[dict, Path, Path]:
    recordings, truth = work / "recordings", {}
    script = [(sentence, None) for sentence in planted_speech.like_sentences(sentences, seed=11)]
    for voice in voices:
        name = voice.replace(":", "-").replace("+", "-")
        truth |= planted_speech.write_read_by(recordings, f"{name}/list", voice, script)
    (work / "truth.json").write_text(json.dumps(truth, indent=1))
    config = work / "segment.yaml"
    config.write_text(f"recordings: {json.dumps(str(recordings))}\ndataset: {json.dumps(str(work / 'dataset'))}\n"
                      "segment_asr_model: pocketsphinx\n")  # fmt: skip
    return truth, config, work / "dataset"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/segment_long_script.py", description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=420, help="sentences a recording (420: about 28 minutes)")
    parser.add_argument("--voices", default="en-029", help="comma-separated voices, one recording each")
    parser.add_argument("--out", help="the work folder, new or empty (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder: recordings, truth, dataset")
    args = parser.parse_args(argv)
    with work_folder(parser, args.out, args.keep, "segment-long-") as work:
        try:
            truth, config, dataset = build(work, args.sentences, args.voices.split(","))
        except planted_faults.NoEspeak as error:
            print(f"segment_long_script: {error}", file=sys.stderr)
            return 1
        audio_seconds = sum(planted["seconds"] for planted in truth.values())
        print(f"{len(truth)} recordings, {audio_seconds / 60:.1f} min of audio, {args.sentences} sentences each")
        report, elapsed, _ = segmented_report(config, dataset)
        if report is None:
            return 1
        for line in table(planted_faults.score(truth, report), audio_seconds, elapsed):
            print(line)
        for line in stages(report.get("seconds_by_stage", {}), audio_seconds):
            print(line)
        return 0


if __name__ == "__main__":
    sys.exit(main())
