"""Encodes a config's recordings into the codes cache, before training (which would do it first otherwise).

    python -m tpu_demo.prepare my.yaml [key=value ...]            # only encode the manifest's audio
    accelerate launch -m tpu_demo.prepare my.yaml                # the same, shared by several processes

The main process encodes while the others wait; they then read the cache, so each file is encoded once.
"""

import sys

from accelerate import PartialState
from accelerate.utils import parse_flag_from_env

from tpu_demo.cli import config_parser, fail, refuse_unsupported_transformers, say
from tpu_demo.errors import FineTuneError
from tpu_demo.segmenting.settings import check_segmented


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    from tpu_demo.config.load import load_raw, parse_all
    from tpu_demo.data.training_set import training_data
    from tpu_demo.model.dia import model_config

    args = config_parser("tpu_demo.prepare", "Encode a config's recordings into the codes cache.").parse_args(argv)
    try:
        raw = load_raw(args.config, args.overrides)
        # before TrainingArguments, as in training; like `Accelerator`, honour `accelerate launch --cpu`'s variable
        PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))
        config = parse_all(raw)
        training = config.training
        if config.recordings.recordings:
            check_segmented(config)
        dataset = training_data(
            config.data, model_config(config.model), training.output_dir, training.seed, config.model.model
        )
    except FineTuneError as error:
        fail(error)
    say(f"{len(dataset)} samples ready")
    # the process group goes before the interpreter: left to exit, gloo's threads could abort a process ("terminate
    # called without an active exception", rank 1 of a 2-process prepare in CI, transformers 4.53.3 env)
    state = PartialState()
    state.wait_for_everyone()
    state.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
