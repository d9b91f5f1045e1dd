"""The published workaround, measured: what `accelerator_config={"use_configured_state": True}` gives (4.42+).

Each test is one claim of the README's "Until upstream merges" section; the patch leaves all of them unchanged.
"""

from accelerate import Accelerator
from accelerate.utils import DistributedType
from transformers import Trainer
from transformers.trainer_pt_utils import AcceleratorConfig

from tests.testing_utils import (
    TF_VERSION,
    AccelerateStateTestCase,
    TinyRegression,
    make_training_args,
    regression_dataset,
)

CONFIGURED = {"use_configured_state": True}


class UseConfiguredStateTest(AccelerateStateTestCase):
    def test_keeps_the_accelerator_created_first(self):
        accelerator = Accelerator(cpu=True)
        make_training_args(self.output_dir, None, use_cpu=True, accelerator_config=dict(CONFIGURED))
        self.assertEqual(accelerator.distributed_type, DistributedType.NO)

    def test_needs_the_state_to_exist_first(self):
        with self.assertRaisesRegex(ValueError, "requires a pre-configured"):
            make_training_args(self.output_dir, None, use_cpu=True, accelerator_config=dict(CONFIGURED))

    def test_is_consumed_from_a_reused_config(self):
        # the first arguments pop it from the `AcceleratorConfig`; the next ones built from it behave as without it
        accelerator = Accelerator(cpu=True)
        config = AcceleratorConfig(**CONFIGURED)
        make_training_args(self.output_dir, None, use_cpu=True, accelerator_config=config)
        self.assertFalse(config.use_configured_state)
        make_training_args(self.output_dir, "reset", use_cpu=True, accelerator_config=config)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))

    def test_trainer_settings_that_differ_from_the_state(self):
        Accelerator(cpu=True)  # mixed precision "no"
        args = make_training_args(
            self.output_dir, None, use_cpu=True, bf16=True, max_steps=2, accelerator_config=dict(CONFIGURED)
        )
        if TF_VERSION >= (5, 0):  # 5.x passes its mixed precision to the Accelerator, which refuses the change
            with self.assertRaisesRegex(ValueError, "AcceleratorState has already been initialized"):
                Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
        else:  # 4.x trains with the state's precision: `bf16=True` is silently not applied
            trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
            self.assertEqual(trainer.train().global_step, 2)
            self.assertEqual(trainer.accelerator.mixed_precision, "no")
