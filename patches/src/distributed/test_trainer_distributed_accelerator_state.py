# Copyright 2026 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""An `Accelerator` created before the `TrainingArguments` of a launched `Trainer` (#35702, #40376)."""

import json
import os

from parameterized import parameterized

from transformers.testing_utils import (
    TestCasePlus,
    backend_device_count,
    execute_subprocess_async,
    get_torch_dist_unique_port,
    require_accelerate,
    require_deepspeed,
    require_torch_multi_accelerator,
    torch_device,
)

from .test_trainer_distributed import CONFIGS_DIR, SCRIPTS_DIR


SCRIPT = os.path.join(SCRIPTS_DIR, "accelerator_then_arguments.py")


def launch_reports(test_case, config, num_processes=None):
    """Each rank's report of `accelerator_then_arguments.py` under `accelerate launch --config_file CONFIG`."""
    num_processes = num_processes or backend_device_count(torch_device)
    output_dir = test_case.get_auto_remove_tmp_dir()
    cmd = ["accelerate", "launch", "--config_file", os.path.join(CONFIGS_DIR, f"{config}.yaml")]
    cmd += ["--num_processes", str(num_processes), "--main_process_port", str(get_torch_dist_unique_port()), SCRIPT]
    cmd += ["--output_dir", output_dir, "--report_to", "none", "--max_steps", "3", "--save_strategy", "no"]
    execute_subprocess_async(cmd, env=test_case.get_env())
    reports = []
    for rank in range(num_processes):
        with open(os.path.join(output_dir, f"rank{rank}.json"), encoding="utf-8") as f:
            reports.append(json.load(f))
    return reports


@require_accelerate
@require_torch_multi_accelerator
class TrainerDistributedAcceleratorStateTest(TestCasePlus):
    def assert_trained(self, reports, kept_by_arguments, distributed_type, reset_line):
        for report in reports:
            self.assertEqual(report["global_step"], 3)
            self.assertTrue(report["distributed_type"].startswith(distributed_type), report)
            self.assertEqual(report["kept_by_arguments"], kept_by_arguments)
        # a reset is said once, by the main process; a kept state is not
        self.assertEqual(
            [len(report["reset_lines"]) for report in reports], [int(bool(reset_line))] + [0] * (len(reports) - 1)
        )
        if reset_line:
            self.assertIn(reset_line, reports[0]["reset_lines"][0])

    def test_ddp_state_is_kept(self):
        self.assert_trained(launch_reports(self, "ddp"), True, "MULTI_", None)

    @parameterized.expand([("fsdp",), ("fsdp2",)])
    def test_fsdp_state_is_reset_by_the_trainer(self, config):
        # kept by the arguments (the FSDP `AcceleratorState` wrote its type into their `PartialState`); the plugin
        # cannot be shown equal to the one the `Trainer` builds
        self.assert_trained(launch_reports(self, config), True, "FSDP", "with `fsdp_plugin`, it cannot be reused")

    @parameterized.expand([("deepspeed_zero2",), ("deepspeed_zero3",)])
    @require_deepspeed
    def test_deepspeed_state_is_reset_by_the_trainer(self, config):
        self.assert_trained(launch_reports(self, config), True, "DEEPSPEED", "`deepspeed_plugins`")
