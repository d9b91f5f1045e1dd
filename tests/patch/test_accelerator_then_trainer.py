"""The issue's workflow: a user `Accelerator`, then `TrainingArguments`, then a `Trainer` that trains."""

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType
from parameterized import parameterized
from transformers import Trainer

from tests.testing_utils import (
    AccelerateStateTestCase,
    TinyRegression,
    bug_on_unpatched,
    make_training_args,
    regression_dataset,
)


class AcceleratorThenTrainerTest(AccelerateStateTestCase):
    @parameterized.expand([("default", None), ("auto", "auto"), ("preserve", "preserve")])
    @bug_on_unpatched
    def test_user_accelerator_still_usable(self, _, policy):
        accelerator = Accelerator(cpu=True)
        args = make_training_args(self.output_dir, policy, use_cpu=True, max_steps=2, per_device_train_batch_size=4)
        self.assertEqual(accelerator.distributed_type, DistributedType.NO)

        trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
        self.assertEqual(trainer.train().global_step, 2)

        # The user's own loop still works on the same accelerator after the Trainer trained.
        model = TinyRegression()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(regression_dataset(), batch_size=8)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            loss = model(**batch)["loss"]
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        self.assertEqual(accelerator.distributed_type, DistributedType.NO)
        self.assertEqual(accelerator.state.mixed_precision, "no")
