"""Programs that work on the published release keep working, and the one deliberate difference is reachable."""

import dataclasses

from accelerate import Accelerator
from parameterized import parameterized
from transformers import Trainer
from transformers.trainer_pt_utils import AcceleratorConfig

from harness.scenarios import POLICIES
from tests.testing_utils import (
    PATCHED,
    AccelerateStateTestCase,
    TinyRegression,
    make_training_args,
    regression_dataset,
)

ALREADY_INITIALIZED = "AcceleratorState has already been initialized"


class UnchangedBehaviourTest(AccelerateStateTestCase):
    @parameterized.expand([("dict",), ("dataclass",)])
    def test_arguments_derived_from_a_configured_state(self, config_type):
        # `use_configured_state` is consumed by the arguments that use it, as published: arguments derived from them
        # (or built from the same `AcceleratorConfig`) get a state matching their own settings.
        Accelerator(cpu=True)
        config = {"use_configured_state": True}
        config = config if config_type == "dict" else AcceleratorConfig(**config)
        args = make_training_args(self.output_dir, None, use_cpu=True, accelerator_config=config, max_steps=2)
        for derived in (
            dataclasses.replace(args, bf16=True),
            make_training_args(
                self.output_dir, None, use_cpu=True, bf16=True, accelerator_config=args.accelerator_config, max_steps=2
            ),
        ):
            trainer = Trainer(model=TinyRegression(), args=derived, train_dataset=regression_dataset())
            self.assertEqual(trainer.train().global_step, 2)
            self.assertEqual(trainer.accelerator.state.mixed_precision, "bf16")

    @parameterized.expand([(policy or "default", policy) for policy in (None, *POLICIES)])
    def test_ddp_backend_without_a_process_group_raises(self, _, policy):
        # published: accelerate refuses gloo when nothing is distributed; under every policy the fresh state built
        # for the arguments raises the same, before anything could be kept
        Accelerator(cpu=True)
        with self.assertRaisesRegex(ValueError, "Default process group has not been initialized"):
            make_training_args(self.output_dir, policy, use_cpu=True, ddp_backend="gloo")

    @parameterized.expand([("default", None, False), ("auto", "auto", False), ("reset", "reset", True)])
    def test_second_accelerator_with_other_settings(self, _, policy, reconfigurable):
        # The deliberate difference: a kept state belongs to the first Accelerator, and accelerate refuses to change
        # it under it, exactly as `Accelerator(); Accelerator(mixed_precision="bf16")` does without transformers.
        # `reset` gives the published behaviour back.
        first = Accelerator(cpu=True)
        make_training_args(self.output_dir, policy, use_cpu=True)
        if reconfigurable or not PATCHED:
            self.assertEqual(Accelerator(cpu=True, mixed_precision="bf16").mixed_precision, "bf16")
            self.assertFalse(PATCHED and hasattr(first.state, "distributed_type") and first.mixed_precision == "no")
        else:
            with self.assertRaisesRegex(ValueError, ALREADY_INITIALIZED):
                Accelerator(cpu=True, mixed_precision="bf16")
            self.assertEqual(first.mixed_precision, "no")

    def test_second_accelerator_is_refused_by_accelerate_itself(self):
        Accelerator(cpu=True)
        with self.assertRaisesRegex(ValueError, ALREADY_INITIALIZED):
            Accelerator(cpu=True, mixed_precision="bf16")
