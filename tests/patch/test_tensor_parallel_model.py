"""A `Trainer` whose model is sharded by tensor parallelism (loaded with `tp_plan`) passes its `Accelerator` a
parallelism config (5.x) or a `TorchTensorParallelPlugin` (4.5x) that `TrainingArguments` cannot see: a state the
arguments kept is one that differs, and an initialized state would ignore it. The `Trainer`'s `Accelerator` then
starts from no `AcceleratorState`, as on the published release, where building the arguments reset it."""

import types
from unittest.mock import patch

import pytest
import transformers.trainer
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from transformers import Trainer

from tests.testing_utils import (
    TF_VERSION,
    AccelerateStateTestCase,
    TinyRegression,
    bug_on_unpatched,
    make_training_args,
    regression_dataset,
)


class Stop(Exception):
    pass


def state_when_the_trainer_builds_its_accelerator(args, tp_size) -> dict:
    """The shared `AcceleratorState` the `Trainer`'s `Accelerator` would be built over (it is not built: on CPU
    processes accelerate refuses a parallelism config)."""
    model = TinyRegression()
    if tp_size:
        model.tp_size = tp_size
        model.config = types.SimpleNamespace(distributed_config=types.SimpleNamespace(dp_size=1))
    seen = []

    def accelerator(**kwargs):
        seen.append((dict(AcceleratorState._shared_state), kwargs))
        raise Stop

    with patch.object(transformers.trainer, "Accelerator", accelerator), pytest.raises(Stop):
        Trainer(model=model, args=args, train_dataset=regression_dataset())
    return seen[0]


@pytest.mark.skipif(TF_VERSION < (4, 52), reason="a Trainer reads the model's tensor parallelism from 4.52")
class TensorParallelModelTest(AccelerateStateTestCase):
    def cpu_arguments(self):
        return make_training_args(self.output_dir, use_cpu=True)  # the state's device on any host

    def test_a_kept_state_is_not_used_for_a_tensor_parallel_model(self):
        Accelerator(cpu=True)
        state, passed = state_when_the_trainer_builds_its_accelerator(self.cpu_arguments(), 2)
        self.assertTrue({"torch_tp_plugin", "parallelism_config"} & set(passed))  # what the Trainer passes
        self.assertEqual(state, {})  # the fresh state that takes it

    @bug_on_unpatched
    def test_a_model_without_tensor_parallelism_keeps_it(self):
        accelerator = Accelerator(cpu=True)
        state, _ = state_when_the_trainer_builds_its_accelerator(self.cpu_arguments(), None)
        self.assertIs(state.get("dynamo_plugin"), accelerator.state.dynamo_plugin)
