"""Turns the one YAML config into an `accelerate launch` call, so there is no second config file.

python -m tpu_demo.launch tpu_demo/configs/tiny.yaml [key=value ...] [--segment] [--dry-run]
"""

import contextlib
import os
import shlex
import signal
import subprocess
import sys

from tpu_demo.cli import (
    Terminated,
    config_parser,
    fail,
    interrupted_exit_code,
    refuse_unsupported_transformers,
    say,
)
from tpu_demo.config.checks import check_config, refuse_launch_conflicts
from tpu_demo.config.load import load_raw, parse_launch
from tpu_demo.data.metadata import ALLOW_REMOVALS
from tpu_demo.errors import FineTuneError

# FSDP2: each encoder and decoder layer its own unit, gathered for its forward and backward only
FSDP_FLAGS = [
    "--use_fsdp", "--fsdp_version", "2", "--fsdp_reshard_after_forward", "true",
    "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
    "--fsdp_transformer_layer_cls_to_wrap", "DiaEncoderLayer,DiaDecoderLayer",
    "--fsdp_state_dict_type", "SHARDED_STATE_DICT",
]  # fmt: skip


def detect_distributed_type(launch) -> str:
    from accelerate.utils import is_torch_xla_available  # accelerate's own check: its reading of USE_TORCH_XLA

    if is_torch_xla_available():
        return "XLA"
    import torch

    several = launch.num_processes * launch.num_machines > 1
    if torch.cuda.is_available() and (several or torch.cuda.device_count() > 1):
        return "MULTI_GPU"
    return "MULTI_CPU" if several else "NO"


def launch_arguments(distributed_type, launch=None):
    """`accelerate launch` arguments (up to the program) and the environment variables to set, for one of accelerate's
    distributed types and a config's `LaunchArguments`. The one builder of the command: the launcher and the tests
    use it."""
    from tpu_demo.config.arguments import LaunchArguments

    launch = launch or LaunchArguments()
    env, num_processes = {}, launch.num_processes
    machines = 1 if distributed_type == "XLA" else launch.num_machines  # each host of a pod slice launches alone
    cmd = ["--num_machines", str(machines), "--mixed_precision", launch.mixed_precision]
    cmd += ["--dynamo_backend", "no"]
    if distributed_type in ("MULTI_CPU", "MULTI_GPU"):
        # accelerate takes one of --multi_gpu and --use_fsdp; checkpoints of a sharded run stay sharded (each process
        # writes its part); `final/` is gathered whole
        cmd += FSDP_FLAGS if launch.sharding == "fsdp" else ["--multi_gpu"]
        if distributed_type == "MULTI_CPU":
            env["ACCELERATE_USE_CPU"] = "true"  # `--cpu` would force a single process
        if launch.num_machines > 1:  # accelerate counts the processes of all machines
            num_processes *= launch.num_machines
            cmd += ["--machine_rank", str(launch.machine_rank), "--main_process_ip", launch.main_process_ip]
            cmd += ["--rdzv_backend", launch.rdzv_backend]
    elif distributed_type == "XLA":
        # one process per host drives all its devices through SPMD (tpu_demo.runtime.spmd); on a pod slice every host
        # runs this same launch and PJRT finds the others
        num_processes = 1
        if os.environ.get("PJRT_DEVICE", "TPU") != "TPU" and "LOCAL_RANK" not in os.environ:
            env["LOCAL_RANK"] = "0"  # else accelerate sees local_process_index -1 on a non-TPU XLA device
    else:
        num_processes = 1
    cmd += ["--num_processes", str(num_processes)]
    if launch.main_process_port is not None:
        cmd += ["--main_process_port", str(launch.main_process_port)]
    return cmd, env


def accelerate_command(config, overrides=()):
    """The `accelerate launch` arguments for `config`, and the environment variables to set for it."""
    return launch_plan(config, overrides)[2:]


def launch_plan(config, overrides=(), program=("tpu_demo.train",)):
    """The distributed type the run gets, the launch settings, and `accelerate_command`'s arguments (for `program`:
    the module and its flags) and environment variables."""
    raw = load_raw(config, overrides)
    check_config(raw)  # here, not in every process after the launch
    launch = parse_launch(raw)
    distributed_type = launch.distributed_type
    if distributed_type == "auto":
        distributed_type = detect_distributed_type(launch)
    refuse_launch_conflicts(launch, distributed_type, accelerate_version())
    cmd, env = launch_arguments(distributed_type, launch)
    module, *flags = program
    return distributed_type, launch, [*cmd, "-m", module, str(config), *overrides, *flags], env


def accelerate_version() -> str:
    from importlib.metadata import version

    return version("accelerate")


def run_accelerate_launch(cmd, env) -> int:
    """accelerate's launcher, in this process: a failed or interrupted run ends with its own message and exit code, not
    with a traceback of the launcher's (`CalledProcessError` from one process, `ChildFailedError` from several)."""
    from accelerate.commands.launch import launch_command, launch_command_parser
    from accelerate.utils import patch_environment
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    args = launch_command_parser().parse_args(cmd)
    previous = signal.signal(signal.SIGTERM, stop_the_run)
    try:
        with patch_environment(**env):
            launch_command(args)
    except subprocess.CalledProcessError as error:  # a process ended by a signal before it could say anything: -N
        return error.returncode if error.returncode >= 0 else 128 - error.returncode
    except ChildFailedError as error:
        return error.get_first_failure()[1].exitcode
    except SignalException as error:  # several processes: torch's agent stopped them, and they said what to do
        return 128 + error.sigval
    except KeyboardInterrupt as interrupt:  # Ctrl-C: the run's processes got it too and said what to do
        if str(interrupt):  # SIGTERM, and no process to say it
            say(str(interrupt), file=sys.stderr)
        return interrupted_exit_code(interrupt)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def stop_the_run(signum, frame) -> None:
    """SIGTERM to the launcher (`kill`, a container's stop, a scheduler): its processes stop as they stop for Ctrl-C
    (saying how to resume), and the launcher waits for them. accelerate's one-process launcher died and left its
    process training into the output folder. With several processes, torch's agent takes the signal over."""
    import psutil

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # told once; run_accelerate_launch puts its handler back
    # not their data loaders' workers: each process stops its own
    children = [child for child in psutil.Process().children() if child.status() != psutil.STATUS_ZOMBIE]
    if not children:  # before the run's processes start (or torch's agent waits for other hosts): stop here
        raise Terminated("stopped before the run's processes started")
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.send_signal(signum)


def xla_plan(hosts: int, argv=None) -> list[str]:
    """What runs where on XLA: one process per host; on a pod slice, the same command on every host (by `gcloud`,
    one host at a time or all at once)."""
    if hosts == 1:
        return ["XLA: one process on this host, for all of its devices"]
    args = [arg for arg in (sys.argv[1:] if argv is None else argv) if arg != "--dry-run"]
    launch = shlex.join(["python", "-m", "tpu_demo.launch", *args])
    command = shlex.quote(f"cd {shlex.quote(os.getcwd())} && {launch}")
    ssh = "gcloud compute tpus tpu-vm ssh TPU_NAME --zone ZONE"
    return [
        f"XLA pod slice of {hosts} hosts: every host runs the same command, one process for all of its devices; "
        "PJRT joins them and the mesh spans every chip. Per host, or all at once:",
        *(f"host {host}: {ssh} --worker={host} --command {command}" for host in range(hosts)),
        f"all hosts: {ssh} --worker=all --command {command}",
    ]


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = config_parser("tpu_demo.launch", __doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    segment = "cut the YAML's recordings into its dataset (tpu_demo.segment) in its processes, instead of training"
    parser.add_argument("--segment", action="store_true", help=segment)
    parser.add_argument(
        ALLOW_REMOVALS, dest="allow_removals", action="store_true", help=f"with --segment: {ALLOW_REMOVALS}"
    )
    args = parser.parse_args(argv)
    if args.allow_removals and not args.segment:
        parser.error(f"{ALLOW_REMOVALS} is a flag of --segment")
    program = ("tpu_demo.segment", *[ALLOW_REMOVALS] * args.allow_removals) if args.segment else ("tpu_demo.train",)
    try:
        distributed_type, launch, cmd, env = launch_plan(args.config, args.overrides, program)
    except FineTuneError as error:
        fail(error)
    if distributed_type == "XLA":
        for line in xla_plan(launch.num_machines, argv):
            say(line)
    print("+ " + shlex.join([*(f"{k}={v}" for k, v in env.items()), "accelerate", "launch", *cmd]), flush=True)
    if args.dry_run:
        return 0
    return run_accelerate_launch(cmd, env)


if __name__ == "__main__":
    sys.exit(main())
