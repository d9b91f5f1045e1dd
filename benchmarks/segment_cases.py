"""Segmenting recordings as Dia users have them: what `python -m tpu_demo.segment` keeps, and with which text and tags.

The cases (tests/planted_speech.py, espeak-ng voices at 44.1 kHz): a script of numbers, money, dates, ordinals, times,
titles, acronyms, units and names read as people read them, and a clean control; a two-voice dialogue with its
transcript (`[S1]`/`[S2]`, a `(laughs)` said as a laugh) and without one (diarized); digital dropouts, a +12 dB gain
step and clicks inside sentences; a stereo file with the speech in its left channel and noise in its right; a second
voice over three sentences at the same level. It prints
a row per recording as benchmarks/segment_faults.py does, with the kept dialogue clips whose speaker tags are wrong,
the totals, the time per audio hour, and each stage's time (the report's seconds_by_stage).

    python benchmarks/segment_cases.py [--out DIR] [--keep] [--processes N] [key=value ...]
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


def build(work: Path, overrides: list[str]) -> tuple[dict, Path, Path]:
    recordings = work / "recordings"
    truth = planted_speech.write_written_forms(recordings)
    truth |= planted_speech.write_dialogues(recordings)
    truth |= planted_speech.write_faults_in_pieces(recordings)
    truth |= planted_speech.write_one_channel_stereo(recordings)
    truth |= planted_faults.write_overlap_faults(recordings, under_db=0.0, name="overlap-same-level")
    (work / "truth.json").write_text(json.dumps(truth, indent=1))
    lines = [f"recordings: {json.dumps(str(recordings))}", f"dataset: {json.dumps(str(work / 'dataset'))}",
             "segment_asr_model: pocketsphinx"]  # fmt: skip
    lines += [f"{key.strip()}: {value.strip()}" for key, _, value in (o.partition("=") for o in overrides)]
    config = work / "segment.yaml"
    config.write_text("\n".join(lines) + "\n")
    return truth, config, work / "dataset"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/segment_cases.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the work folder, new or empty (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder: recordings, truth, dataset")
    parser.add_argument("--processes", type=int, default=1, help="segment with this many CPU processes")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="more segmenting settings for the YAML")
    args = parser.parse_args(argv)
    with work_folder(parser, args.out, args.keep, "segment-cases-") as work:
        try:
            truth, config, dataset = build(work, args.overrides)
        except planted_faults.NoEspeak as error:
            print(f"segment_cases: {error}", file=sys.stderr)
            return 1
        audio_seconds = sum(planted["seconds"] for planted in truth.values())
        print(f"{len(truth)} recordings, {audio_seconds / 60:.1f} min of audio; segment_asr_model: pocketsphinx")
        report, elapsed, result = segmented_report(config, dataset, args.processes)
        if report is None:
            return 1
        print("\n".join(line for line in result.stdout.splitlines() if line.startswith("tpu_demo:")))
        for line in table(planted_faults.score(truth, report), audio_seconds, elapsed, args.processes):
            print(line)
        dialogues = {name: planted for name, planted in truth.items() if planted["fault"] == "dialogue"}
        for name, errors in planted_speech.tag_errors(dialogues, report).items():
            kept = sum(1 for c in report["clips"] if c["recording"] == name and not c.get("dropped"))
            print(f"{name}: {errors} of {kept} kept clips with wrong speaker tags")
        for line in stages(report.get("seconds_by_stage", {}), audio_seconds, args.processes):
            print(line)
        return 0


if __name__ == "__main__":
    sys.exit(main())
