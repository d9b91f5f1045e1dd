"""The optimizer `optim` names (as the Trainer builds it: no weight decay on biases and norms) and its schedule."""

import torch
from accelerate.utils import DistributedType
from transformers import get_scheduler

from tpu_demo.config.checks import OPTIMIZERS
from tpu_demo.errors import FineTuneError


def parameter_groups(model, weight_decay: float):
    decay, no_decay = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decay if parameter.ndim >= 2 else no_decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(args, model, distributed_type):
    groups = parameter_groups(model, args.weight_decay)
    optim = str(getattr(args.optim, "value", args.optim))
    if optim in ("adamw_torch", "adamw_torch_fused"):
        # the fused kernel has no XLA implementation: there the same update runs unfused
        fused = optim == "adamw_torch_fused" and distributed_type != DistributedType.XLA
        betas = (args.adam_beta1, args.adam_beta2)
        return torch.optim.AdamW(groups, lr=args.learning_rate, betas=betas, eps=args.adam_epsilon, fused=fused)
    if optim == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=args.learning_rate, scale_parameter=False, relative_step=False)
    if optim == "sgd":
        return torch.optim.SGD(groups, lr=args.learning_rate)
    raise ValueError(f"optim {optim!r}: check_config admits only {OPTIMIZERS}")


def init_optimizer_state(optimizer) -> None:
    """AdamW's state made before the first step, so the first step traces the same graph as every later one."""
    if not isinstance(optimizer, torch.optim.AdamW):
        return
    fused = optimizer.defaults.get("fused")
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and not optimizer.state[p]:
                # the fused kernel keeps `step` beside the parameter, the others on the host
                step_device = p.device if fused else "cpu"
                optimizer.state[p]["step"] = torch.tensor(0.0, dtype=torch.float32, device=step_device)
                optimizer.state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                optimizer.state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def make_scheduler(args, optimizer, max_steps: int, num_processes: int):
    # accelerate steps a prepared scheduler once per process: count the schedule in those units.
    try:
        return get_scheduler(
            args.lr_scheduler_type,
            optimizer,
            num_warmup_steps=args.get_warmup_steps(max_steps) * num_processes,
            num_training_steps=max_steps * num_processes,
            scheduler_specific_kwargs=args.lr_scheduler_kwargs or None,
        )
    except (TypeError, ValueError) as error:  # a setting it needs, or one it has not, in lr_scheduler_kwargs
        name = getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)
        kwargs = args.lr_scheduler_kwargs or {}
        raise FineTuneError(f"lr_scheduler_type {name}: {error} (lr_scheduler_kwargs: {kwargs})") from None
