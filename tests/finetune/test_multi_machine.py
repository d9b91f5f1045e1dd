"""Several machines from the one YAML: `num_machines`, `machine_rank`, `main_process_ip`, `rdzv_backend` reach
`accelerate launch`; two launches on this host acting as two machines (gloo over 127.0.0.1, one process each) train
as one machine with two processes does, and resume from the same checkpoint."""

import subprocess
import sys

import pytest

from tests.demo_utils import CONFIG, assert_ok, losses_by_step, run_demo, summary
from tests.testing_utils import ROOT, bug_on_unpatched, free_ports, launch_env, require_dia, same_on_every_line

pytestmark = require_dia
RUN = ["max_steps=4", "logging_steps=1", "save_steps=2", "eval_steps=4", "report_to=none"]


def two_machines(output_dir, *overrides):
    """`tpu_demo.launch` twice, as machine 0 and machine 1 of two, one process each, meeting at 127.0.0.1."""
    port = free_ports()[0]
    common = [f"output_dir={output_dir}", *RUN, "distributed_type=MULTI_CPU", "num_processes=1", "num_machines=2",
              "main_process_ip=127.0.0.1", f"main_process_port={port}", *overrides]  # fmt: skip
    launches = [
        subprocess.Popen(
            [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), *common, f"machine_rank={rank}"],
            env=launch_env(),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    results = []
    for launch in launches:
        out, err = launch.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(launch.args, launch.returncode, out, err))
    return results


@pytest.mark.parametrize(
    "settings, flags",
    [
        ({"num_machines": 2, "machine_rank": 1, "main_process_ip": "10.0.0.1"},
         ["--machine_rank", "1", "--main_process_ip", "10.0.0.1", "--rdzv_backend", "static"]),
        ({"num_machines": 2, "main_process_ip": "10.0.0.1", "rdzv_backend": "c10d", "num_processes": 4},
         ["--num_machines", "2", "--rdzv_backend", "c10d", "--num_processes", "8"]),  # accelerate counts all machines
    ],
)  # fmt: skip
def test_the_machines_settings_reach_accelerate_launch(settings, flags):
    from tpu_demo.config.arguments import LaunchArguments
    from tpu_demo.launch import launch_arguments

    cmd, env = launch_arguments("MULTI_CPU", LaunchArguments(**settings))
    pairs = list(zip(cmd, cmd[1:], strict=False))
    assert all((flag, value) in pairs for flag, value in zip(flags[::2], flags[1::2], strict=True)), cmd
    assert env == {"ACCELERATE_USE_CPU": "true"}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["num_machines=2"], "num_machines: 2 machines need main_process_ip"),
        (["num_machines=2", "main_process_ip=10.0.0.1", "machine_rank=2"], "machine_rank: 2 is not in 0..1"),
        (["num_machines=2", "main_process_ip=10.0.0.1", "distributed_type=NO"], "need distributed_type MULTI_GPU"),
        (["rdzv_backend=etcd"], "rdzv_backend: 'etcd' is not one of static, c10d"),
    ],
)
def test_settings_that_cannot_meet_are_refused(overrides, message):
    result = subprocess.run(
        [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), *overrides, "--dry-run"],
        env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr


@bug_on_unpatched
@same_on_every_line  # accelerate's rendezvous; the 4.x model trains in two processes in test_sharding.py
def test_two_machines_train_as_one_with_two_processes_and_resume_alike(tmp_path):
    one = tmp_path / "one_machine"
    assert_ok(run_demo(one, *RUN, "num_processes=2", "distributed_type=MULTI_CPU"))
    both = two_machines(tmp_path / "two_machines")
    for result in both:
        assert_ok(result)
    two = summary(tmp_path / "two_machines")
    assert two["num_processes"] == 2 and two["distributed_type"] == "DistributedType.MULTI_CPU"
    assert losses_by_step(tmp_path / "two_machines") == pytest.approx(losses_by_step(one), rel=1e-5)
    # interrupted after the checkpoint at step 2, both machines resume from it and end where the whole run did
    resumed = tmp_path / "resumed"
    for result in two_machines(resumed, "stop_after_steps=2"):
        assert_ok(result)
    machine_0, machine_1 = two_machines(resumed, "resume_from_checkpoint=latest")
    assert_ok(machine_0)
    assert_ok(machine_1)
    assert "resumed at step 2" in machine_0.stdout  # the main process says it
    assert losses_by_step(resumed) == pytest.approx(losses_by_step(one), rel=1e-5)
    assert summary(resumed)["steps"] == 4 and summary(resumed)["eval_loss"] == pytest.approx(two["eval_loss"])


def test_distributed_type_no_written_bare_is_read_as_no(tmp_path):
    # YAML 1.1 reads a bare NO as false: `distributed_type: NO` was refused as "False is not one of ..."
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.read_text().replace("distributed_type: auto", "distributed_type: NO"))
    result = subprocess.run(
        [sys.executable, "-m", "tpu_demo.launch", str(config), "--dry-run"],
        env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert_ok(result)
    assert "--num_processes 1" in result.stdout and "--multi_gpu" not in result.stdout
