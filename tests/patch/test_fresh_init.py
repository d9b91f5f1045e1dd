"""No state before `TrainingArguments`: every policy sets up the devices and a `Trainer` trains."""

from accelerate import PartialState
from accelerate.utils import DistributedType
from parameterized import parameterized
from transformers import Trainer

from harness.scenarios import POLICIES
from tests.testing_utils import (
    AccelerateStateTestCase,
    TinyRegression,
    capture_training_args_logs,
    make_training_args,
    regression_dataset,
)


class FreshInitTest(AccelerateStateTestCase):
    @parameterized.expand([(policy or "default", policy) for policy in (None, *POLICIES)])
    def test_arguments_then_trainer(self, _, policy):
        with capture_training_args_logs() as warnings:
            args = make_training_args(
                self.output_dir, policy, use_cpu=True, max_steps=3, per_device_train_batch_size=4, logging_steps=1
            )
        self.assertEqual(warnings.out, "")
        self.assertEqual(args.device.type, "cpu")
        self.assertEqual(PartialState().distributed_type, DistributedType.NO)

        model = TinyRegression()
        before = model.linear.weight.detach().clone()
        trainer = Trainer(model=model, args=args, train_dataset=regression_dataset())
        result = trainer.train()
        self.assertEqual(result.global_step, 3)
        self.assertFalse(before.equal(model.linear.weight.detach()))
