"""On a real XLA device (torch_xla's PJRT CPU backend runs the TPU code path): the state and the fine-tune."""

from accelerate import Accelerator
from accelerate.utils import DistributedType

from tests.demo_utils import assert_ok, metrics, run_demo, summary
from tests.testing_utils import (
    PATCHED,
    AccelerateStateTestCase,
    bug_on_unpatched,
    capture_training_args_logs,
    make_training_args,
    require_dia,
    require_xla,
)

WARMUP_STEPS = 5


@require_xla
class XlaStateTest(AccelerateStateTestCase):
    @bug_on_unpatched
    def test_xla_state_survives_default_arguments(self):
        accelerator = Accelerator()
        self.assertEqual(accelerator.distributed_type, DistributedType.XLA)
        args = make_training_args(self.output_dir)
        self.assertEqual(accelerator.distributed_type, DistributedType.XLA)
        self.assertEqual(args.device, accelerator.device)

    @bug_on_unpatched
    def test_use_cpu_contradicts_xla_state(self):
        accelerator = Accelerator()
        with self.assertRaisesRegex(ValueError, "runs on `xla:0` but `use_cpu=True`"):
            make_training_args(self.output_dir, "preserve", use_cpu=True)
        self.assertEqual(accelerator.distributed_type, DistributedType.XLA)

    def test_use_cpu_resets_xla_state_with_warning_under_auto(self):
        accelerator = Accelerator()
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, "auto", use_cpu=True)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        if PATCHED:
            self.assertIn("runs on `xla:0` but `use_cpu=True`", warnings.text)


@require_xla
@require_dia
def test_fine_tune_on_xla_learns_without_recompiling(tmp_path):
    out = tmp_path / "run"
    result = run_demo(out, "max_steps=40", "logging_steps=1", "eval_steps=0", "save_steps=20")
    assert_ok(result)
    final = summary(out)
    assert final["distributed_type"] == "DistributedType.XLA" and final["device"].startswith("xla")
    assert final["last_loss"] < final["first_loss"] / 2
    compilations = [m["compilations"] for m in metrics(out) if "loss" in m]
    assert compilations[WARMUP_STEPS - 1] > 0
    assert compilations[WARMUP_STEPS - 1 :] == [compilations[WARMUP_STEPS - 1]] * (40 - WARMUP_STEPS + 1), compilations
    assert final["eval_samples"] == final["eval_dataset_size"]
