"""One process per XLA host, driving all of its devices through torch_xla's SPMD API (accelerate has no SPMD path).

On an XLA host with more than one device (a TPU VM's chips, or PJRT CPU's virtual devices), or with `sharding: fsdp`,
the training process enables SPMD before the Accelerator exists; accelerate then sees one replica and keeps what it
does everywhere (loaders, mixed precision, gradient accumulation, `save_state`/`load_state`). This module adds:

- one mesh over every device of every host, axis `fsdp`;
- every batch sharded on its batch axis, so `per_device_*_batch_size` stays per device (the loader's batch is that
  times the devices);
- `sharding: no`: the weights replicated on every device (data parallel);
- `sharding: fsdp`: what torch_xla's FSDPv2 (`SpmdFullyShardedDataParallel`) does to each wrapped layer, done in place
  on every Dia encoder and decoder layer so the model keeps its parameter names: each weight sharded on its largest
  axis, the layer's output sharded on the batch axis, an optimisation barrier for its backward. The optimizer's
  moments take their weight's sharding.
"""

import numpy as np
import torch

from tpu_demo.errors import FineTuneError

AXIS = "fsdp"


def wanted(launch) -> bool:
    """Whether this process runs SPMD (`launch`: the config's `LaunchArguments`); asks the XLA runtime, so call it in
    the training process only."""
    from accelerate.utils import is_torch_xla_available

    if not is_torch_xla_available():
        return False
    import torch_xla.runtime as xr

    return launch.sharding == "fsdp" or launch.num_machines > 1 or xr.global_runtime_device_count() > 1


class Spmd:
    def __init__(self, launch):
        import torch_xla.distributed.spmd as xs
        import torch_xla.runtime as xr

        xr.use_spmd()  # before the Accelerator puts anything on the device
        if xr.process_count() != launch.num_machines:
            raise FineTuneError(
                f"num_machines: {launch.num_machines} hosts, but the XLA runtime joined {xr.process_count()}: every "
                "host of the slice runs the same command (`tpu_demo.launch --dry-run` prints it)"
            )
        read_shards_on_host()
        self.devices = xr.global_runtime_device_count()
        self.mesh = xs.Mesh(np.arange(self.devices), (self.devices,), (AXIS,))
        self.sharded = launch.sharding == "fsdp"

    def shard_model(self, model, device) -> torch.nn.Module:
        """The model on `device`; with `sharding: fsdp`, its weights sharded and each layer a unit."""
        import torch_xla.distributed.spmd as xs

        from tpu_demo.model.dia import dia_layers

        model = model.to(device)
        if not self.sharded:
            return model
        for param in model.parameters():
            self._shard_like_weight(param, param)
        for layer in dia_layers(model):
            xs.apply_backward_optimization_barrier(layer)
            layer.register_forward_hook(lambda module, args, output: self._shard_hidden_states(output))
        return model

    def shard_optimizer_state(self, optimizer) -> None:
        """Each moment sharded as its weight: moments made apart from their weight, or loaded from a checkpoint, come
        replicated (a loaded weight keeps its sharding)."""
        if not self.sharded:
            return
        for group in optimizer.param_groups:
            for param in group["params"]:
                for value in optimizer.state.get(param, {}).values():
                    if torch.is_tensor(value) and value.shape == param.shape:
                        self._shard_like_weight(value, param)

    def _shard_like_weight(self, tensor, weight) -> None:
        """`tensor` sharded on `weight`'s largest axis, as FSDPv2 shards a weight (a scalar stays whole)."""
        import torch_xla.distributed.spmd as xs

        if weight.dim():
            spec = [None] * weight.dim()
            spec[int(np.argmax(weight.shape))] = AXIS
            xs.mark_sharding(tensor, self.mesh, tuple(spec))

    def report(self, model, optimizer) -> dict:
        """For summary.json: the mesh, and what each device holds of the weights and of the optimizer's state."""
        state = [
            v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.device.type == "xla"
        ]
        weights = list(model.parameters())
        return {
            "devices": self.devices,
            "sharding": "fsdp" if self.sharded else "no",
            "weight_bytes": sum(p.numel() * p.element_size() for p in weights),
            "weight_bytes_per_device": bytes_per_device(weights, self.devices),
            "optimizer_state_bytes": sum(v.numel() * v.element_size() for v in state),
            "optimizer_state_bytes_per_device": bytes_per_device(state, self.devices),
        }

    def _shard_hidden_states(self, output) -> None:
        import torch_xla.distributed.spmd as xs

        hidden_states = output if torch.is_tensor(output) else output[0]
        xs.mark_sharding(hidden_states, self.mesh, batch_axis(hidden_states))

    def shard_loaders(self, *loaders) -> None:
        """Each batch of accelerate's prepared XLA loaders uploaded already sharded on its batch axis (marking a tensor
        on the device would copy it back to the host to reshard it, at every step)."""
        for loader in loaders:
            loader._parallel_loader_kwargs["input_sharding"] = BatchAxis(self.mesh)


class BatchAxis:
    """What torch_xla's `ParallelLoader(input_sharding=...)` asks of a `ShardingSpec`, for a batch of tensors of
    several ranks: the first (batch) axis of each sharded over the mesh. Every host loads the global batch."""

    minibatch = False

    def __init__(self, mesh):
        self.mesh = mesh

    def xla_spec(self, tensor: torch.Tensor):
        import torch_xla.distributed.spmd as xs

        if not tensor.dim():
            return None
        return xs.ShardingSpec(self.mesh, batch_axis(tensor)).xla_spec(tensor)


def batch_axis(tensor: torch.Tensor) -> tuple:
    """The partition spec of a batch-first tensor: its batch axis over the mesh, the rest whole."""
    return (AXIS,) + (None,) * (tensor.dim() - 1)


def host_copy(state):
    """`state` (a state dict, or any nest of tensors) with its tensors on the host; on XLA one sync for all of them."""
    from accelerate.utils import is_torch_xla_available

    if is_torch_xla_available():
        import torch_xla.core.xla_model as xm

        return xm._maybe_convert_to_cpu(state)  # what accelerate's `save` calls; see `read_shards_on_host`
    return torch.utils._pytree.tree_map(lambda v: v.cpu() if torch.is_tensor(v) else v, state)


def read_shards_on_host() -> None:
    """torch_xla 2.9 gathers a sharded tensor for the host with a graph it compiles at every call, so each checkpoint
    and sample would compile a graph per weight and moment. On one host every shard is local: assembled from the
    shards instead, with no graph. Wraps `xm._maybe_convert_to_cpu`, which accelerate's `save` and `host_copy` call."""
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    original = xm._maybe_convert_to_cpu
    if xr.process_count() > 1 or getattr(original, "reads_shards", False):
        return

    def is_sharded(value) -> bool:
        on_xla = torch.is_tensor(value) and value.device.type == "xla"
        return on_xla and bool(torch_xla._XLAC._get_xla_sharding_spec(value))

    def convert(data, convert=True):
        if convert:
            sharded = [v for v in torch.utils._pytree.tree_leaves(data) if is_sharded(v)]
            torch_xla._XLAC._xla_sync_multi(sharded, devices=[], wait=True, sync_xla_data=False)
            data = torch.utils._pytree.tree_map(lambda v: assemble(v) if is_sharded(v) else v, data)
        return original(data, convert)

    convert.reads_shards = True
    xm._maybe_convert_to_cpu = convert


def assemble(tensor: torch.Tensor) -> torch.Tensor:
    """A host copy of `tensor` from its local shards (an uneven last shard is padded: the padding is dropped)."""
    from torch_xla.distributed.spmd.xla_sharding import wrap_as_sharded_tensor

    whole = torch.empty(tensor.shape, dtype=tensor.dtype)
    for shard in wrap_as_sharded_tensor(tensor).local_shards:
        region = whole[tuple(shard.indices)] if isinstance(shard.indices, list) else whole
        region.copy_(shard.data[tuple(slice(0, n) for n in region.shape)])
    return whole


def shard_numel(index, shape) -> int:
    """Elements of the region `index` (a slice per axis, or `...` for all of a replicated tensor) of `shape`."""
    if index is Ellipsis:
        return int(np.prod(shape))
    return int(np.prod([len(range(*axis.indices(n))) for axis, n in zip(index, shape, strict=True)]))


def bytes_per_device(tensors, devices: int) -> list[int]:
    """What each device holds of `tensors`, in bytes, read from the runtime's placement of their shards: a sharded
    tensor's shards (XLA pads them to one size), an unsharded one whole on every device. Moves no data."""
    import torch_xla

    held = np.zeros(devices, dtype=np.int64)
    for tensor in tensors:
        if not torch_xla._XLAC._get_xla_sharding_spec(tensor):
            held += tensor.numel() * tensor.element_size()
            continue
        shards = torch_xla._XLAC._get_local_shard_replica_and_indices([tensor])[0]
        held[: len(shards)] += max(shard_numel(index, tensor.shape) for _, index in shards) * tensor.element_size()
    return held.tolist()
