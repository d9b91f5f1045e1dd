"""Hyperparameter search: `Trainer.hyperparameter_search` (trial settings set on the same arguments, whose devices
are set up once) and successive `TrainingArguments` with different settings each train as on the published release."""

import unittest

from accelerate import Accelerator
from accelerate.state import AcceleratorState
from parameterized import parameterized
from transformers import Trainer
from transformers.integrations import is_optuna_available

from harness.scenarios import POLICIES
from tests.testing_utils import (
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

    @parameterized.expand([(policy or "default", policy) for policy in (None, *POLICIES)])
    def test_each_trial_trains_with_its_settings(self, _, policy):
        # each state was the previous `Trainer`'s, which new arguments replace under every policy, as published
        self.assertEqual(self.run_trials(policy), ["no", "bf16", "bf16"])


def hp_space(trial):
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-1, log=True),
        "per_device_train_batch_size": trial.suggest_categorical("per_device_train_batch_size", [4, 8]),
        "max_steps": trial.suggest_int("max_steps", 2, 4),
    }


@unittest.skipUnless(is_optuna_available(), "needs optuna (the test extra)")
class TrainerHyperparameterSearchTest(AccelerateStateTestCase):
    def search(self, policy, accelerator_first):
        import optuna

        accelerator = Accelerator(cpu=True) if accelerator_first else None
        args = make_training_args(self.output_dir, policy, use_cpu=True, eval_strategy="no", seed=0)
        data = regression_dataset()
        trainer = Trainer(model_init=TinyRegression, args=args, train_dataset=data, eval_dataset=data)
        losses = []  # one per finished trial, from the evaluation each trial ends with
        best = trainer.hyperparameter_search(
            backend="optuna",
            direction="minimize",
            hp_space=hp_space,
            n_trials=3,
            compute_objective=lambda metrics: losses.append(metrics["eval_loss"]) or metrics["eval_loss"],
            sampler=optuna.samplers.RandomSampler(seed=0),
        )
        return best, losses, accelerator

    @parameterized.expand(
        [(f"{policy or 'default'}_{first}", policy, first) for policy in (None, "auto", "reset") for first in (0, 1)]
    )
    def test_each_trial_trains_as_with_reset(self, _, policy, accelerator_first):
        best, losses, accelerator = self.search(policy, accelerator_first)
        self.assertEqual(len(losses), 3)
        AcceleratorState._reset_state(True)
        self.assertEqual(losses, self.search("reset", accelerator_first)[1])  # the policy changes no trial
        self.assertEqual(best.objective, min(losses))
        if accelerator:
            self.assertTrue(hasattr(accelerator.state, "distributed_type"))
