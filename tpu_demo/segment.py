"""Long recordings to a dataset: cut at pauses, transcribed, filtered (`recordings` in the YAML; docs/DATA.md).

    python -m tpu_demo.segment my.yaml [key=value ...]
    accelerate launch -m tpu_demo.segment my.yaml              # the recordings shared by several processes

Writes the `dataset` folder (a new one): clips/, metadata.csv (audio,text,speaker,language), which training reads, and
segment_report.json: what was kept, what was dropped and why. Run again after an interruption, it continues: a
recording done with the same settings is not done again.
"""

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path

from accelerate import PartialState
from accelerate.utils import parse_flag_from_env

from tpu_demo.cli import PREFIX, config_parser, fail, refuse_unsupported_transformers, say
from tpu_demo.data.segmenting import (
    PARTS,
    REPORT,
    Clip,
    drop_unusual_pace,
    find_recordings,
    recogniser,
    recording_fingerprint,
    recordings_digest,
    report,
    segment,
    settings_fingerprint,
)
from tpu_demo.errors import FineTuneError


def output_folder(config) -> Path:
    """The `dataset` folder the clips go to: new, or one this command wrote; never inside the recordings."""
    out, source = Path(config.data.dataset).resolve(), Path(config.recordings.recordings).resolve()
    if out == source or source in out.parents or out in source.parents:
        raise FineTuneError(f"dataset {config.data.dataset}: must be a folder apart from the recordings {source}")
    if out.is_dir() and any(out.iterdir()) and not ((out / PARTS).is_dir() or (out / REPORT).is_file()):
        raise FineTuneError(
            f"dataset {config.data.dataset}: holds files tpu_demo.segment did not write; give a new folder"
        )
    return out


def segment_share(config, recordings, out: Path, state) -> None:
    """This process's share of the recordings not done yet, each saved as one part."""
    from tqdm.auto import tqdm

    from tpu_demo.evaluation.intelligibility import Transcriber

    settings = settings_fingerprint(config.recordings, recogniser(config))
    parts = out / PARTS
    todo, share = [], recordings[state.process_index :: state.num_processes]
    for recording in share:
        part = parts / f"{hashlib.sha256(recording.name.encode()).hexdigest()[:16]}.json"
        fingerprint = recording_fingerprint(recording, settings)
        if not (part.is_file() and json.loads(part.read_text()).get("fingerprint") == fingerprint):
            todo.append((recording, part, fingerprint))
    if state.is_main_process and len(todo) < len(share):
        say(f"{len(share) - len(todo)} of this process's {len(share)} recordings done before; segmenting the rest")
    if not todo:
        return
    device = str(state.device) if state.device.type == "cuda" else "cpu"  # XLA: the host CPU, as for encoding
    language = config.recordings.segment_language
    transcriber = Transcriber(recogniser(config), key="segment_asr_model", device=device, language=language)
    parts.mkdir(parents=True, exist_ok=True)  # after the recogniser loaded: a refused run leaves nothing
    bar = tqdm(todo, desc="segmenting", unit="recording", disable=not state.is_main_process)
    for recording, part, fingerprint in bar:
        clips = segment(recording, config.recordings, transcriber, out)
        partial = part.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"fingerprint": fingerprint, "clips": [dataclasses.asdict(c) for c in clips]}))
        partial.replace(part)  # whole or absent: an interrupted recording is done again


def merge(config, recordings, out: Path) -> dict:
    """Every recording's clips into metadata.csv and the report; the pace filter needs them all."""
    import csv
    import io

    clips = []
    for recording in recordings:
        part = out / PARTS / f"{hashlib.sha256(recording.name.encode()).hexdigest()[:16]}.json"
        clips += [Clip(**clip) for clip in json.loads(part.read_text())["clips"]]
    drop_unusual_pace(clips, config.recordings.pace_tolerance)
    kept = {clip.audio for clip in clips if not clip.dropped}
    for wav in (out / "clips").rglob("*.wav") if (out / "clips").is_dir() else []:
        if str(wav.relative_to(out)) not in kept:  # dropped by the pace filter, or left by other settings
            wav.unlink()
    table = io.StringIO()
    writer = csv.writer(table)
    language = config.recordings.segment_language or ""
    writer.writerow(["audio", "text", "speaker", "language"])
    writer.writerows([clip.audio, clip.text, clip.speaker or "", language] for clip in clips if not clip.dropped)
    (out / "metadata.csv").write_text(table.getvalue(), encoding="utf-8")
    summary = report(clips, len(recordings))
    summary["settings"] = settings_fingerprint(config.recordings, recogniser(config))
    summary["recordings_digest"] = recordings_digest(config.recordings.recordings)
    (out / REPORT).write_text(json.dumps(summary, indent=1))
    return summary


def report_lines(summary: dict, out: Path) -> list[str]:
    kept = summary["kept"]
    total = kept["seconds"] + sum(reason["seconds"] for reason in summary["dropped"].values())
    dropped = "; ".join(f"{name} {d['clips']} ({d['seconds']:.1f} s)" for name, d in summary["dropped"].items())
    speakers = "; ".join(f"{name} {s['clips']} ({s['seconds']:.1f} s)" for name, s in summary["speakers"].items())
    return [
        f"{summary['recordings']} recordings, {total:.1f} s in clips: kept {kept['clips']} ({kept['seconds']:.1f} s)",
        f"dropped: {dropped or 'none'}",
        f"kept per speaker: {speakers or 'none'}",
        f"dataset: {out / 'metadata.csv'}; every clip and why it was dropped: {out / REPORT}",
    ]


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    from tpu_demo.config.checks import check_config, settings
    from tpu_demo.config.load import load_raw

    args = config_parser("tpu_demo.segment", __doc__.splitlines()[0]).parse_args(argv)
    try:
        raw = load_raw(args.config, args.overrides)
        check_config(raw)
        config = settings(raw)  # no TrainingArguments: segmenting trains nothing
        state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))
        if not config.recordings.recordings:
            raise FineTuneError("recordings: not set: name the folder of long recordings to cut into clips")
        recogniser(config)
        out = output_folder(config)
        recordings = find_recordings(config.recordings.recordings)
        if any(recording.text for recording in recordings):
            import jiwer  # noqa: F401 (aligning a recording's text compares transcripts)
        segment_share(config, recordings, out, state)
        state.wait_for_everyone()
        if state.is_main_process:
            for line in report_lines(merge(config, recordings, out), out):
                say(line)
    except ImportError as error:
        fail(f"recordings: {error.name} is not installed (pip install {error.name})")
    except KeyboardInterrupt:  # each recording finished is saved: a rerun does the rest
        sys.exit(f"{PREFIX}: interrupted; the recordings done are kept: run the same command again to continue")
    except FineTuneError as error:
        fail(error)
    state.wait_for_everyone()
    state.destroy_process_group()  # before the interpreter exits (see tpu_demo.prepare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
