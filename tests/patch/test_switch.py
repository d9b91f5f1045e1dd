"""The one switch, `accelerator_config`'s `existing_state`: from a dict, an `AcceleratorConfig`, a JSON file, the
command line and an arguments file, as every key of `accelerator_config`; a bad value, or one that contradicts
`use_configured_state`, is refused before the state is touched."""

import json
import os
import typing

import yaml
from accelerate import Accelerator
from parameterized import parameterized
from transformers import HfArgumentParser, TrainingArguments
from transformers.trainer_pt_utils import AcceleratorConfig

from tests.testing_utils import AccelerateStateTestCase, bug_on_unpatched


class SwitchSourcesTest(AccelerateStateTestCase):
    def parse(self, *argv):
        if typing.get_args(typing.get_type_hints(TrainingArguments)["accelerator_config"])[:1] == (str,):
            # 4.x: once a `Trainer` has run in the process, typing's cache gives the field's hint as
            # `Union[str, dict, None]`, and the release's `HfArgumentParser` then parses it as a dict, patched or not
            self.skipTest("this release's HfArgumentParser takes accelerator_config for a dict in this process")
        (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", self.output_dir, "--report_to", "none", *argv]
        )
        return args

    @parameterized.expand([("json_string",), ("json_file",)])
    @bug_on_unpatched
    def test_command_line(self, form):
        value = json.dumps({"existing_state": "reset"})
        if form == "json_file":
            path = os.path.join(self.output_dir, "accelerator_config.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(value)
            value = path
        self.assertEqual(self.parse("--accelerator_config", value).accelerator_config.existing_state, "reset")

    @parameterized.expand([("yaml", yaml.safe_dump, "parse_yaml_file"), ("json", json.dumps, "parse_json_file")])
    @bug_on_unpatched
    def test_arguments_file(self, suffix, dump, parse):
        path = os.path.join(self.output_dir, f"args.{suffix}")
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump({"output_dir": self.output_dir, "accelerator_config": {"existing_state": "preserve"}}))
        (args,) = getattr(HfArgumentParser(TrainingArguments), parse)(path)
        self.assertEqual(args.accelerator_config.existing_state, "preserve")

    @bug_on_unpatched
    def test_dataclass(self):
        args = TrainingArguments(self.output_dir, accelerator_config=AcceleratorConfig(existing_state="reset"))
        self.assertEqual(args.accelerator_config.existing_state, "reset")

    @bug_on_unpatched
    def test_default_is_auto_and_keeps_a_matching_state(self):
        accelerator = Accelerator()
        args = TrainingArguments(self.output_dir, report_to="none")  # the same device as the state, on any host
        self.assertEqual(args.accelerator_config.existing_state, "auto")
        self.assertEqual(args.to_dict()["accelerator_config"]["existing_state"], "auto")
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))

    @parameterized.expand([("Preserve",), ("keep",), ("",), (None,), (True,)])
    @bug_on_unpatched
    def test_bad_value_raises_value_error(self, value):
        accelerator = Accelerator()
        with self.assertRaisesRegex(ValueError, "`existing_state` must be 'auto', 'preserve' or 'reset'"):
            TrainingArguments(self.output_dir, accelerator_config={"existing_state": value})
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))  # refused before anything was touched

    @parameterized.expand([("dict",), ("command_line",)])
    @bug_on_unpatched
    def test_reset_contradicts_use_configured_state(self, source):
        accelerator = Accelerator()
        config = {"use_configured_state": True, "existing_state": "reset"}
        with self.assertRaisesRegex(ValueError, "contradicts `existing_state='reset'`"):
            if source == "dict":
                TrainingArguments(self.output_dir, accelerator_config=config)
            else:
                self.parse("--accelerator_config", json.dumps(config))
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))

    @parameterized.expand([("auto",), ("preserve",)])
    @bug_on_unpatched
    def test_use_configured_state_with_the_other_values(self, value):
        # `use_configured_state=True` takes the state as it is; "auto" is the default, "preserve" says the same
        accelerator = Accelerator(cpu=True)
        config = {"use_configured_state": True, "existing_state": value}
        args = TrainingArguments(self.output_dir, use_cpu=True, accelerator_config=config)
        self.assertEqual(args.device, accelerator.device)
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))
