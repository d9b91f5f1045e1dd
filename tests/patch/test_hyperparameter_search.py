"""Successive TrainingArguments with different settings (what hyperparameter search does) must each train."""

from parameterized import parameterized
from transformers import Trainer

from tests.testing_utils import (
    PATCHED,
    AccelerateStateTestCase,
    TinyRegression,
    make_training_args,
    regression_dataset,
)

# bf16 flips between trials; the learning rate alone changes in the last one
TRIALS = [(False, 1e-3), (True, 1e-3), (True, 1e-2)]


class HyperparameterSearchTest(AccelerateStateTestCase):
    def run_trials(self, policy):
        precisions = []
        for bf16, learning_rate in TRIALS:
            args = make_training_args(
                self.output_dir,
                policy,
                use_cpu=True,
                bf16=bf16,
                learning_rate=learning_rate,
                max_steps=2,
                per_device_train_batch_size=4,
            )
            trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
            self.assertEqual(trainer.train().global_step, 2)
            precisions.append(trainer.accelerator.state.mixed_precision)
        return precisions

    @parameterized.expand([(policy or "default", policy) for policy in (None, "auto", "reset")])
    def test_each_trial_trains_with_its_settings(self, _, policy):
        self.assertEqual(self.run_trials(policy), ["no", "bf16", "bf16"])

    def test_preserve_refuses_a_trial_that_contradicts_the_state(self):
        if not PATCHED:
            self.assertEqual(self.run_trials("preserve"), ["no", "bf16", "bf16"])  # no policy: always reset
            return
        with self.assertRaisesRegex(ValueError, "`mixed_precision` is `no`, not `bf16`"):
            self.run_trials("preserve")
