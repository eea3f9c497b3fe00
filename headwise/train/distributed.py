"""Multi-process data-parallel training under ``torchrun``.

``torchrun --nproc_per_node=N script.py`` sets ``RANK``, ``WORLD_SIZE`` and
``LOCAL_RANK`` (and the rendezvous address). :func:`init_distributed` reads them, starts
the process group (gloo on CPU, nccl on CUDA) and tells the trainer which rank it is;
without them it returns a single-process context and starts nothing. Only rank 0 writes
checkpoints and logs; collectives keep the ranks in step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in a data-parallel run.

    Attributes:
        rank: global rank (0 in a single process).
        world_size: number of processes (1 in a single process).
        local_rank: rank on this machine; picks the CUDA device.
        device: the device this process trains on.
        owns_group: whether :func:`init_distributed` started the process group (and
            :func:`shutdown_distributed` must end it).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    owns_group: bool = False

    @property
    def is_distributed(self) -> bool:
        """More than one process."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes checkpoints and logs."""
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """Whether the environment describes a multi-process run."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def resolve_device(device: str | None) -> torch.device:
    """The device to train on: ``device`` if given, else CUDA when available, else CPU.

    Under torchrun a bare "cuda" becomes ``cuda:LOCAL_RANK``.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return dev


def init_distributed(device: torch.device) -> DistContext:
    """Join the torchrun process group if there is one.

    Args:
        device: the device this process trains on (decides gloo or nccl).

    Returns:
        The context; a single-process one when not launched by torchrun.

    Raises:
        RuntimeError: launched by torchrun but torch.distributed is unavailable.
    """
    if not launched_by_torchrun() and not (dist.is_available() and dist.is_initialized()):
        return DistContext(device=device)
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    owns = False
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
        owns = True
    return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size(),
                       local_rank=int(os.environ.get("LOCAL_RANK", "0")), device=device,
                       owns_group=owns)


def shutdown_distributed(ctx: DistContext, *, wait: bool = True) -> None:
    """End the process group if this context started it.

    Args:
        ctx: the context :func:`init_distributed` returned.
        wait: meet the other ranks first (False after an error, when they may be gone).
    """
    if ctx.owns_group and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()


def _comm_device(ctx: DistContext) -> torch.device:
    # nccl only moves CUDA tensors; gloo moves CPU ones.
    return ctx.device if dist.get_backend() == "nccl" else torch.device("cpu")


def all_reduce_sum(t: Tensor, ctx: DistContext) -> Tensor:
    """Sum ``t`` over all ranks (returned on ``t``'s device); ``t`` itself if alone."""
    if not ctx.is_distributed:
        return t
    buf = t.to(_comm_device(ctx)).clone()
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    return buf.to(t.device)


def broadcast_from_main(t: Tensor, ctx: DistContext) -> Tensor:
    """Rank 0's ``t`` on every rank."""
    if not ctx.is_distributed:
        return t
    buf = t.to(_comm_device(ctx)).clone()
    dist.broadcast(buf, src=0)
    return buf.to(t.device)


def all_gather_equal(t: Tensor, ctx: DistContext) -> list[Tensor]:
    """Every rank's ``t`` (all of one shape and dtype), in rank order."""
    if not ctx.is_distributed:
        return [t]
    buf = t.to(_comm_device(ctx)).contiguous()
    out = [torch.empty_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    return [o.to(t.device) for o in out]


def barrier(ctx: DistContext) -> None:
    """Wait for every rank."""
    if ctx.is_distributed:
        dist.barrier()
