"""What `accelerate launch --use_fsdp` sets up on GPUs, on CPU processes: accelerate 1.15 builds an FSDP state for GPU
kinds only (on CPU it keeps MULTI_CPU and wraps in DDP), while torch's FSDP2 itself shards over gloo. Test-only: the
fine-tuner refuses FSDP where accelerate does not set it up.

    accelerate launch --use_fsdp ... fsdp_on_cpu.py CONFIG [key=value ...]   the fine-tune, sharded
"""

import sys

from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType

_accelerator_state_init = AcceleratorState.__init__


def _init(self, *args, fsdp_plugin=None, **kwargs):
    _accelerator_state_init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
    if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
        # accelerate's own branch for GPU kinds (state.py, AcceleratorState.__init__)
        self.distributed_type = DistributedType.FSDP
        if self._mixed_precision != "no":
            fsdp_plugin.set_mixed_precision(self._mixed_precision)
        self.fsdp_plugin = fsdp_plugin
        PartialState._shared_state["distributed_type"] = self.distributed_type


def build_fsdp_on_cpu() -> None:
    """From now on an `Accelerator` made with an FSDP plugin (or `ACCELERATE_USE_FSDP`) on CPU processes shards."""
    AcceleratorState.__init__ = _init


if __name__ == "__main__":
    build_fsdp_on_cpu()
    from tpu_demo.train import main

    main(sys.argv[1:])
