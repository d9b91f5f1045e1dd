"""Fine-tunes Dia with Accelerate; run it with `python -m tpu_demo.launch CONFIG` (or `accelerate launch`).

accelerate launch -m tpu_demo.train tpu_demo/configs/tiny.yaml [key=value ...]
"""

from tpu_demo.cli import (
    config_parser,
    fail,
    refuse_unsupported_transformers,
    stop_interrupted,
    terminated_as_interrupted,
)
from tpu_demo.config.load import load_raw
from tpu_demo.errors import FineTuneError


def train(config, overrides=()) -> dict:
    """Runs the fine-tune `config` (a YAML file) describes, with `key=value` overrides; returns its summary."""
    from tpu_demo.training.recipe import DiaFineTune

    run = DiaFineTune(load_raw(config, overrides))
    run.setup()
    run.train()
    summary = run.finish()
    run.cleanup()
    return summary


def main(argv=None) -> None:
    refuse_unsupported_transformers()
    args = config_parser("tpu_demo.train", "Fine-tune Dia with Accelerate.").parse_args(argv)
    with terminated_as_interrupted():  # around the handlers too: a second SIGTERM does not cut the line short
        try:
            train(args.config, args.overrides)
        except FineTuneError as error:
            fail(error)
        except KeyboardInterrupt as interrupt:
            stop_interrupted(
                interrupt,
                "the same command with resume_from_checkpoint=latest continues from the run's newest checkpoint (a "
                "run stopped before its first starts again in a new output_dir)",
            )


if __name__ == "__main__":
    main()
