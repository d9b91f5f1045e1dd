"""Long recordings to a dataset: cut at pauses, judged, transcribed, joined (`recordings` in the YAML; docs/DATA.md).

    python -m tpu_demo.segment my.yaml [key=value ...]
    accelerate launch -m tpu_demo.segment my.yaml              # the recordings shared by several processes

Writes the `dataset` folder (a new one): clips/, metadata.csv (audio,text,speaker,language), which training reads, and
segment_report.json: what was kept, what was dropped and why. Each stage is cached by its own settings: run again
after an interruption or a change, only what the change touches is done again (a join setting never re-runs the
models). Texts corrected and rows deleted in metadata.csv are kept, in corrections.csv, and applied on every run.
"""

import sys

from accelerate import PartialState
from accelerate.utils import parse_flag_from_env

from tpu_demo.cli import (
    config_parser,
    fail,
    refuse_unsupported_transformers,
    say,
    stop_interrupted,
    terminated_as_interrupted,
)
from tpu_demo.data.metadata import ALLOW_REMOVALS
from tpu_demo.errors import FineTuneError
from tpu_demo.segmenting.align import aligns
from tpu_demo.segmenting.decode import decode_recordings
from tpu_demo.segmenting.read import find_recordings
from tpu_demo.segmenting.run import merge, segment_share, share_times
from tpu_demo.segmenting.settings import missing_package, recogniser, sized_for_training
from tpu_demo.segmenting.stages import TIMES
from tpu_demo.segmenting.write import output_folder, read_corrections, report_lines


def refuse_without_recogniser(config, recordings) -> None:
    """A recording whose text is not aligned (none beside it, or not English) is transcribed: without a recogniser
    the run is refused, naming them, before any work."""
    untranscribed = [recording.path.name for recording in recordings if not aligns(recording, config.recordings)]
    if untranscribed and not recogniser(config):
        named = ", ".join(untranscribed[:3]) + (f" and {len(untranscribed) - 3} more" * (len(untranscribed) > 3))
        raise FineTuneError(
            f"recordings: {len(untranscribed)} of {len(recordings)} have no English transcript to align ({named}): "
            "set segment_asr_model (pocketsphinx, offline, or a transformers recogniser such as "
            "openai/whisper-small) to transcribe them, or put each one's text beside it (NAME.txt, .srt or .vtt)"
        )


def unused_recogniser(config, recordings) -> str | None:
    """A recogniser named in segment_asr_model that no recording needs (each has its English text, aligned by
    pocketsphinx): said, not silently ignored."""
    named = config.recordings.segment_asr_model
    if (
        not named
        or named == "pocketsphinx"
        or not all(aligns(recording, config.recordings) for recording in recordings)
    ):
        return None
    return (
        f"segment_asr_model {named}: not used: each recording has its English text, which pocketsphinx aligns to "
        "its audio (a recogniser transcribes recordings without a text and splits other languages' texts)"
    )


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    from tpu_demo.config.checks import check_config, settings
    from tpu_demo.config.load import load_raw

    parser = config_parser("tpu_demo.segment", __doc__.splitlines()[0])
    removals = "remove the clips of more rows deleted from metadata.csv than a few (3, or a tenth of them)"
    parser.add_argument(ALLOW_REMOVALS, dest="allow_removals", action="store_true", help=removals)
    args = parser.parse_args(argv)
    with terminated_as_interrupted():
        try:
            raw = load_raw(args.config, args.overrides)
            check_config(raw)
            config = settings(raw)  # no TrainingArguments: segmenting trains nothing
            state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))
            config = sized_for_training(config, state)
            recogniser(config)
            out = output_folder(config)
            read_corrections(out, args.allow_removals)  # a table the user saved that cannot be read: before any work
            recordings, unreadable = find_recordings(config.recordings.recordings, config.recordings.skip_recordings)
            refuse_without_recogniser(config, recordings)
            unreadable |= decode_recordings(recordings, out, state)
            recordings = [
                recording for recording in recordings if recording.name + recording.path.suffix not in unreadable
            ]
            if not recordings:
                raise FineTuneError(f"recordings {config.recordings.recordings}: none could be read: {unreadable}")
            if state.is_main_process:
                for name, problem in unreadable.items():
                    say(f"recordings: {name}: {problem}: skipped; to leave it out for good, add it to skip_recordings")
                if state.num_processes > 1:  # `accelerate launch --num_processes 2` alone starts one on a CPU host
                    say(f"{len(recordings)} recordings shared by {state.num_processes} processes")
                if unused := unused_recogniser(config, recordings):
                    say(unused)
            if any(recording.text for recording in recordings):
                import jiwer  # noqa: F401 (aligning a recording's text compares transcripts)
            TIMES.clear()  # this run's, not those of an earlier run in this process (a notebook's)
            segment_share(config, recordings, out, state)
            share_times(out, state)
            if state.is_main_process:
                for line in report_lines(merge(config, recordings, out, unreadable, args.allow_removals), out):
                    say(line)
        except ImportError as error:
            name = missing_package(error)
            fail(f"recordings: {name} is not installed (pip install '{name}', or the fine-tuner's `speech` extra)")
        except KeyboardInterrupt as interrupt:  # each stage finished is saved: a rerun does the rest
            stop_interrupted(interrupt, "the recordings done are kept: run the same command again to continue")
        except FineTuneError as error:
            fail(error)
    state.wait_for_everyone()
    state.destroy_process_group()  # before the interpreter exits (see tpu_demo.prepare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
