"""Segmenting recordings with planted faults: what `python -m tpu_demo.segment` keeps and drops, and why, vs the truth.

Two espeak-ng voices (alice, bob) say about 4.5 minutes of sentences in a recordings folder (tests/planted_faults.py):
clean controls (alice's WAV with its transcript, bob's FLAC), white and pink noise at 34, 24, 14 and 10 dB SNR over
whole recordings (below 20 dB the speech counts as faulty), a recording whose second half is noisy at 10 dB, one
sentence clipped, one sentence in the other voice, music only, noise only, a corrupt file and a truncated WAV; and
faults a tool downstream fixes, whose speech should be kept (-40 dBFS peak, a DC offset of 0.2), a 0.3 s file, coughs
and clicks in the pauses (the bursts faulty), a 6 s pause, a telephone band (300-3400 Hz) at 44.1 kHz, and a script
lacking a sentence said and holding one never said; and a second voice over three sentences. The segmenter runs on it
as a user runs it (a new interpreter, offline, one thread), and this prints a row per recording: its fault, the reasons
the report gives for the clips over the faulty sentences (over all of them where none is), seconds of good speech kept
and lost, seconds of faulty speech kept, cuts inside sentences, the longest silence inside a kept clip, kept clips
whose text is not what is said in them; then the totals and the segmenting time per hour of audio. A failed run prints
the end of its stderr and exits 1.

    python benchmarks/segment_faults.py [--out DIR] [--asr pocketsphinx] [--processes N] [--keep] [--omit FAULT]
        [key=value ...]
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def planted():
    """tests/planted_faults.py, also when this file runs as a script (the repository put on the path)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests import planted_faults

    return planted_faults


def build(work: Path, asr: str, omit: list[str], overrides: list[str]) -> tuple[dict, Path, Path]:
    """The recordings (less the omitted faults), the YAML that cuts them, and the truth beside them."""
    recordings = work / "recordings"
    truth = planted().write_recordings(recordings)
    truth |= planted().write_levelling_faults(recordings)  # faults a tool downstream fixes: kept, levelled
    truth |= planted().write_pause_faults(recordings)  # bursts in pauses, a long pause, a telephone band
    truth |= planted().write_script_faults(recordings)  # a script with a sentence missing and one never said
    truth |= planted().write_overlap_faults(recordings)  # a second voice over three sentences
    for name in [name for name, planted in truth.items() if planted["fault"] in omit or name in omit]:
        (recordings / truth.pop(name)["file"]).unlink()
    (work / "truth.json").write_text(json.dumps(truth, indent=1))
    lines = [f"recordings: {json.dumps(str(recordings))}", f"dataset: {json.dumps(str(work / 'dataset'))}",
             f"segment_asr_model: {json.dumps(asr)}", "max_audio_frames: 1720", "max_text_tokens: 512"]  # fmt: skip
    for override in overrides:
        key, _, value = override.partition("=")
        lines.append(f"{key.strip()}: {value.strip()}")
    config = work / "segment.yaml"
    config.write_text("\n".join(lines) + "\n")
    return truth, config, work / "dataset"


def run(config: Path, processes: int = 1) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m tpu_demo.segment CONFIG` as a user runs it, offline and on one thread (`accelerate launch` of
    `processes` CPU processes, the recordings shared, where more than one); its result and seconds."""
    env = os.environ | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    if processes > 1:
        from tests.testing_utils import accelerate_launch

        result = accelerate_launch(ROOT / "tpu_demo/segment.py", config, num_processes=processes, timeout=3600,
                                   env=env)  # fmt: skip
    else:
        result = subprocess.run([sys.executable, "-m", "tpu_demo.segment", str(config)], cwd=ROOT, env=env,
                                capture_output=True, text=True)  # fmt: skip
    return result, time.perf_counter() - start


def table(rows: list[dict], audio_seconds: float, elapsed: float, processes: int = 1) -> list[str]:
    reasons_text = planted().reasons_text
    lines = [f"{'fault':<26} {'reason given':<46} {'kept s':>7} {'lost s':>7} {'faulty kept s':>13} {'cuts':>4} "
             f"{'silence s':>9} {'wrong text':>10}"]  # fmt: skip
    for row in rows:
        reasons = reasons_text(row["reasons"])
        reasons = reasons if len(reasons) <= 46 else reasons[:43] + "..."
        lines.append(
            f"{row['fault']:<26} {reasons:<46} {row['good_kept']:7.1f} {row['good_lost']:7.1f} "
            f"{row['faulty_kept']:13.1f} {row['cuts_inside']:4d} {row['longest_silence_kept']:9.1f} "
            f"{row['wrong_text']:10d}"
        )
    good = sum(row["good_seconds"] for row in rows)
    kept, lost = sum(row["good_kept"] for row in rows), sum(row["good_lost"] for row in rows)
    faulty, cuts = sum(row["faulty_kept"] for row in rows), sum(row["cuts_inside"] for row in rows)
    wrong = sum(row["wrong_text"] for row in rows)
    lines.append(f"{'total':<26} {'':<46} {kept:7.1f} {lost:7.1f} {faulty:13.1f} {cuts:4d} {'':9} {wrong:10d}")
    lines.append(
        f"good speech {good:.1f} s: kept {kept / max(good, 1e-9):.0%}, lost {lost:.1f} s; faulty speech kept "
        f"{faulty:.1f} s; cuts inside sentences (clip edges > 0.2 s into one): {cuts}"
    )
    lines.append(
        f"segmenting: {elapsed:.0f} s for {audio_seconds / 60:.1f} min of audio = "
        f"{elapsed * 3600 / audio_seconds:.0f} s per audio hour ({audio_seconds / elapsed:.1f}x real time, "
        f"{'one thread' if processes == 1 else f'{processes} processes of one thread'})"
    )
    return lines


def stages(seconds: dict, audio_seconds: float, processes: int = 1) -> list[str]:
    """The segmenter's own time by stage (its report's seconds_by_stage: every process's, in seconds of one core),
    per audio hour, and the speed its sum gives with the work spread over `processes` cores."""
    if not seconds:
        return ["(the report has no seconds_by_stage)"]

    def line(name, spent):
        speed = f"{audio_seconds / spent:12.1f}" if spent >= 0.05 else f"{'-':>12}"
        return f"{name:<34} {spent:7.1f} {spent * 3600 / audio_seconds:17.0f} {speed}"

    lines = [f"{'stage (one core)':<34} {'s':>7} {'s per audio hour':>17} {'x real time':>12}"]
    lines += [line(stage, spent) for stage, spent in sorted(seconds.items(), key=lambda item: -item[1])]
    total = sum(seconds.values())
    asr = sum(spent for stage, spent in seconds.items() if stage in ("recogniser", "load recogniser"))
    lines += [line("all stages", total), line("without the recogniser", total - asr)]
    if processes > 1:
        lines += [line(f"all stages, {processes} cores", total / processes),
                  line(f"without the recogniser, {processes} cores", (total - asr) / processes)]  # fmt: skip
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/segment_faults.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the work folder, new or empty (default: a temporary one); removed after "
                        "unless --keep")  # fmt: skip
    parser.add_argument("--asr", default="pocketsphinx", help="segment_asr_model: pocketsphinx, a folder or hub id")
    parser.add_argument("--keep", action="store_true", help="keep the work folder: recordings, truth, dataset")
    parser.add_argument("--processes", type=int, default=1, help="segment with this many CPU processes (accelerate "
                        "launch), one thread each: 2 uses both cores of a 2-core machine")  # fmt: skip
    omit = "leave out a recording, by fault or name: 'corrupt file', alice/corrupt (repeatable)"
    parser.add_argument("--omit", action="append", default=[], metavar="FAULT", help=omit)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="more segmenting settings for the YAML")
    args = parser.parse_args(argv)
    with work_folder(parser, args.out, args.keep, "segment-faults-") as work:
        try:
            truth, config, dataset = build(work, args.asr, args.omit, args.overrides)
        except planted().NoEspeak as error:
            print(f"segment_faults: {error}", file=sys.stderr)
            return 1
        audio_seconds = sum(planted["seconds"] for planted in truth.values())
        speakers = sorted({name.split("/")[0] for name in truth})
        print(f"{len(truth)} recordings, {audio_seconds / 60:.1f} min of audio, speakers {', '.join(speakers)}; "
              f"segment_asr_model: {args.asr}")  # fmt: skip
        report, elapsed, _ = segmented_report(config, dataset, args.processes)
        if report is None:
            return 1
        for line in table(planted().score(truth, report), audio_seconds, elapsed, args.processes):
            print(line)
        for line in stages(report.get("seconds_by_stage", {}), audio_seconds, args.processes):
            print(line)
        return 0


@contextlib.contextmanager
def work_folder(parser, out: str | None, keep: bool, prefix: str):
    """The benchmark's work folder: `out` (new or empty) or a temporary one; removed after unless `keep`."""
    if out and Path(out).exists() and any(Path(out).iterdir()):
        parser.error(f"--out {out}: not empty; give a new folder")
    work = Path(out or tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        if keep:
            print(f"kept: {work} (recordings/, truth.json, segment.yaml, dataset/segment_report.json)")
        else:
            shutil.rmtree(work, ignore_errors=True)


def segmented_report(config: Path, dataset: Path, processes: int = 1):
    """`run`'s report, seconds and result; the report None (the end of its stderr printed) where the run failed."""
    result, elapsed = run(config, processes)
    if result.returncode != 0 or not (dataset / "segment_report.json").is_file():
        print(f"tpu_demo.segment failed (exit {result.returncode}) after {elapsed:.0f} s; its stderr ends:")
        print("\n".join(result.stderr.strip().splitlines()[-15:]) or "(nothing)")
        return None, elapsed, result
    return json.loads((dataset / "segment_report.json").read_text()), elapsed, result


if __name__ == "__main__":
    sys.exit(main())
