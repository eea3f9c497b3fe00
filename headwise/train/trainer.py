"""The Trainer: AdamW, warmup + decay, clipping, mixed precision, length-bucketed
batches, early stopping, JSON-lines metrics, atomic checkpoints with exact resume, and
torchrun data parallelism.

One optimizer step consumes ``grad_accum_steps`` global batches. The loss of each
micro-batch is weighted by its share of the examples in the whole step (summed over all
ranks), so a step's gradient is the mean per-example gradient over every example it saw,
whatever the split into processes and micro-batches. On the CPU a run is bit-for-bit
reproducible from its seed, and a run killed at any moment and resumed from its last
checkpoint ends with the same weights as one never interrupted.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, default_collate
from tqdm.auto import tqdm

from headwise.text.batching import LengthBucketSampler
from headwise.train.batches import batch_size_of, infer_lengths, loss_of, to_device, tokens_of
from headwise.train.checkpoint import (
    BEST,
    CheckpointError,
    clean_temporaries,
    load_checkpoint,
    prune_checkpoints,
    resolve_resume,
    save_checkpoint,
    step_dir_name,
    write_pointer,
)
from headwise.train.config import TrainConfig
from headwise.train.distributed import (
    DistContext,
    all_gather_equal,
    all_reduce_sum,
    barrier,
    broadcast_from_main,
    init_distributed,
    resolve_device,
    shutdown_distributed,
)
from headwise.train.early_stopping import EarlyStopping
from headwise.train.estimate import TrainingEstimate, estimate_training
from headwise.train.metrics_log import MetricsLog, StepMeter
from headwise.train.optim import build_optimizer
from headwise.train.precision import MixedPrecision, resolve_precision
from headwise.train.rng import (
    host_rng_states,
    seed_everything,
    set_host_rng_states,
    set_torch_rng_states,
    torch_rng_states,
)
from headwise.train.schedule import LRSchedule

EvaluateFn = Callable[[nn.Module, DataLoader], Mapping[str, float]]
# Config fields that fix the data order: a resumed run must keep them.
_DATA_ORDER_FIELDS = ("seed", "batch_size", "grad_accum_steps", "shuffle", "drop_last",
                      "bucket_size_multiplier")


@dataclass
class TrainResult:
    """What :meth:`Trainer.train` returns.

    Attributes:
        steps: optimizer steps done in total (including those before a resume).
        epochs: epochs done, fractional mid-epoch.
        best_metric: best value of the early-stopping metric (None without validation).
        best_step: step of that evaluation.
        best_checkpoint: the checkpoint holding the best weights.
        last_checkpoint: the newest checkpoint.
        stopped_early: whether early stopping ended the run.
        history: every record of ``metrics.jsonl`` (empty on ranks other than 0).
    """

    steps: int
    epochs: float
    best_metric: float | None = None
    best_step: int | None = None
    best_checkpoint: Path | None = None
    last_checkpoint: Path | None = None
    stopped_early: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Position:
    step: int = 0
    epoch: int = 0
    batch: int = 0  # global batches consumed in the current epoch


class Trainer:
    """Trains any ``nn.Module`` whose ``forward(**batch)`` returns ``{"loss": scalar, ...}``.

    Args:
        model: the model (moved to the training device).
        config: the training configuration.
        train_data: a map-style dataset (``len`` and ``[i]``) of examples.
        valid_data: validation examples, evaluated every ``config.eval_every`` steps
            (or epoch) and after the last step.
        collate_fn: turns a list of examples into a batch dict (default: torch's
            ``default_collate``; use :func:`headwise.text.pad_collate` for token lists).
        evaluate_fn: ``evaluate_fn(model, valid_loader) -> {name: value}``; without it the
            validation metric is the mean per-example ``"loss"``.
        out_dir: where checkpoints (``step-NNNNNN/``) and ``metrics.jsonl`` go.
        lengths: length of every training example for length bucketing (default:
            ``len(example["input_ids"])`` when examples are dicts holding it, else
            no bucketing).

    Raises:
        ValueError: empty training data, mismatched ``lengths``, or a precision the
            device cannot run (fp16 on the CPU).
        TypeError: ``gradient_checkpointing`` asked of a model without
            ``set_gradient_checkpointing``.
    """

    def __init__(self, model: nn.Module, config: TrainConfig, train_data: Sequence[Any], *,
                 valid_data: Sequence[Any] | None = None,
                 collate_fn: Callable[[list[Any]], Mapping[str, Any]] | None = None,
                 evaluate_fn: EvaluateFn | None = None, out_dir: str | Path,
                 lengths: Sequence[int] | None = None) -> None:
        if len(train_data) == 0:
            raise ValueError("train_data is empty")
        if config.gradient_checkpointing and not callable(
                getattr(model, "set_gradient_checkpointing", None)):
            raise TypeError(f"gradient_checkpointing=True, but {type(model).__name__} has no "
                            "set_gradient_checkpointing(enabled) method")
        self.model = model
        self.config = config
        self.train_data = train_data
        self.valid_data = valid_data
        self.collate_fn = collate_fn if collate_fn is not None else default_collate
        self.evaluate_fn = evaluate_fn
        self.out_dir = Path(out_dir)
        self.device = resolve_device(config.device)
        #: the precision the run takes ("auto" resolved once, with its reason)
        self.precision = resolve_precision(config.precision, self.device)  # fails now
        self.lengths = list(lengths) if lengths is not None else infer_lengths(train_data)
        if len(self.lengths) != len(train_data):
            raise ValueError(f"{len(self.lengths)} lengths for {len(train_data)} examples")

    # ------------------------------------------------------------------ public API
    def train(self, resume: bool | str | Path = False) -> TrainResult:
        """Train until ``max_steps`` / ``epochs`` are done or early stopping triggers.

        Args:
            resume: False starts afresh (refusing an ``out_dir`` that already holds
                checkpoints); True continues from the newest complete checkpoint in
                ``out_dir`` if there is one; a path continues from that checkpoint.

        Returns:
            The :class:`TrainResult`.

        Raises:
            FileExistsError: a fresh start in a directory with checkpoints.
            CheckpointError: an unreadable or foreign checkpoint.
            ValueError: a global batch size not divisible by the number of processes,
                or a checkpoint from a run with another data order.
        """
        ctx = init_distributed(self.device)
        ok = False
        try:
            result = self._train(ctx, resume)
            ok = True
            return result
        finally:
            shutdown_distributed(ctx, wait=ok)

    def announce(self, report: Callable[[str], None]) -> TrainingEstimate:
        """Say, before :meth:`train`, how the run will go: its precision and why, the
        threads, and the measured :meth:`estimate` of its duration (one line each to
        ``report``). Returns the estimate, which callers keep beside the measured time."""
        report(f"precision {self.precision.precision} ({self.precision.reason}); "
               f"{torch.get_num_threads()} threads")
        estimate = self.estimate()
        report(f"estimated training time: {estimate.describe(self.config.epochs)}")
        return estimate

    def estimate(self, measure: int = 3) -> TrainingEstimate:
        """How long :meth:`train` will take: ``measure`` of the run's own first-epoch
        batches timed in its precision, with its optimizer at learning rate 0 (no weight
        moves), scaled to the run (:func:`~headwise.train.estimate.estimate_training`).
        The model is moved to the training device."""
        self.model.to(self.device)
        return estimate_training(self.model, self.train_data, self.collate_fn, self.config,
                                 lengths=self.lengths,
                                 valid_rows=len(self.valid_data or ()), measure=measure,
                                 precision=self.precision.precision)

    @torch.no_grad()
    def evaluate(self, model: nn.Module | None = None) -> dict[str, float]:
        """Validation metrics of ``model`` (default: the trained model) on ``valid_data``.

        Raises:
            ValueError: there is no validation data.
        """
        if self.valid_data is None:
            raise ValueError("no valid_data to evaluate on")
        model = self.model if model is None else model
        cfg = self.config
        loader = DataLoader(self.valid_data, batch_size=cfg.batch_size, shuffle=False,
                            collate_fn=self.collate_fn, num_workers=cfg.num_workers,
                            generator=torch.Generator().manual_seed(cfg.seed))
        amp = MixedPrecision(self.precision.precision, self.device)
        was_training = model.training
        model.eval()
        try:
            with amp.autocast():
                if self.evaluate_fn is not None:
                    return {k: float(v) for k, v in self.evaluate_fn(model, loader).items()}
                total, count = 0.0, 0
                for batch in loader:
                    n = batch_size_of(batch)
                    total += float(loss_of(model(**to_device(batch, self.device)))) * n
                    count += n
                return {"loss": total / max(count, 1)}
        finally:
            model.train(was_training)

    # ------------------------------------------------------------------ the loop
    def _train(self, ctx: DistContext, resume: bool | str | Path) -> TrainResult:
        cfg = self.config
        if cfg.batch_size % ctx.world_size:
            raise ValueError(f"the global batch_size={cfg.batch_size} is not divisible by the "
                             f"{ctx.world_size} processes")
        resume_from = resolve_resume(self.out_dir, resume)
        seed_everything(cfg.seed)
        model = self.model.to(ctx.device)
        if cfg.gradient_checkpointing:
            model.set_gradient_checkpointing(True)
        model.train()
        optimizer = build_optimizer(model, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                    betas=cfg.betas, eps=cfg.eps)
        sampler = LengthBucketSampler(
            self.lengths, cfg.batch_size, shuffle=cfg.shuffle, seed=cfg.seed,
            bucket_size_multiplier=cfg.bucket_size_multiplier, drop_last=cfg.drop_last,
            num_replicas=ctx.world_size, rank=ctx.rank)
        per_epoch = sampler.batches_per_epoch
        if per_epoch == 0:
            raise ValueError(f"{len(self.lengths)} examples make no batch of "
                             f"{cfg.batch_size} (drop_last={cfg.drop_last})")
        total = cfg.max_steps or cfg.epochs * math.ceil(per_epoch / cfg.grad_accum_steps)
        schedule = LRSchedule(optimizer, cfg.schedule, cfg.warmup_for(total), total)
        amp = MixedPrecision(self._agreed_precision(ctx), ctx.device)
        stopper = EarlyStopping(cfg.early_stopping_metric, cfg.early_stopping_mode,
                                cfg.patience)
        pos, last_ckpt, meter = _Position(), None, StepMeter(ctx.device)
        if resume_from is not None:
            ckpt = load_checkpoint(resume_from)
            pos = self._restore(ckpt.state, ckpt.model_state, model, optimizer, schedule, amp,
                                stopper, ctx)
            if ctx.is_main:
                meter.load_state_dict(ckpt.state.get("meter", {}))
            last_ckpt = ckpt.path
        if ctx.is_main:
            clean_temporaries(self.out_dir)
        log = MetricsLog(self.out_dir / "metrics.jsonl", enabled=ctx.is_main,
                         resume_step=pos.step if resume_from is not None else None)
        net: nn.Module = model
        if ctx.is_distributed:
            net = DistributedDataParallel(
                model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)

        bar = tqdm(total=total, initial=pos.step, desc="train", unit="step", dynamic_ncols=True,
                   disable=not (cfg.progress and ctx.is_main))
        stop = stopper.should_stop
        while pos.step < total and not stop:
            sampler.set_epoch(pos.epoch)
            sampler.skip(pos.batch)
            loader = DataLoader(self.train_data, batch_sampler=sampler,
                                collate_fn=self.collate_fn, num_workers=cfg.num_workers,
                                pin_memory=ctx.device.type == "cuda",
                                generator=torch.Generator().manual_seed(
                                    cfg.seed * 1_000_003 + pos.epoch))
            batches = iter(loader)
            while pos.step < total and not stop:
                window = list(itertools.islice(batches, cfg.grad_accum_steps))
                if not window:
                    break
                lr = schedule.apply(pos.step)
                grad_norm = self._step(net, window, optimizer, amp, ctx, meter)
                pos.step += 1
                pos.batch += len(window)
                epoch_done = pos.batch >= per_epoch
                if epoch_done:
                    pos.epoch, pos.batch = pos.epoch + 1, 0
                epochs = pos.epoch + pos.batch / per_epoch
                bar.update(1)
                if pos.step % cfg.log_every == 0 or pos.step >= total:
                    record = meter.record(ctx, step=pos.step, epoch=epochs, lr=lr,
                                          grad_norm=grad_norm)
                    log.write(record)
                    bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{lr:.2e}")
                improved = False
                if self.valid_data is not None and (
                        (cfg.eval_every == "epoch" and epoch_done)
                        or (cfg.eval_every != "epoch" and pos.step % cfg.eval_every == 0)
                        or pos.step >= total):
                    stop, improved = self._evaluate_and_track(model, stopper, ctx, log,
                                                              pos.step, epochs)
                if (improved or stop or pos.step >= total
                        or (cfg.checkpoint_every is not None
                            and pos.step % cfg.checkpoint_every == 0)
                        or (cfg.checkpoint_every is None and epoch_done)):
                    last_ckpt = self._save(model, optimizer, schedule, amp, stopper, meter,
                                           pos, ctx, improved) or last_ckpt
        bar.close()
        best = None
        if stopper.best_step is not None:
            best = self.out_dir / step_dir_name(stopper.best_step)
        return TrainResult(steps=pos.step, epochs=pos.epoch + pos.batch / per_epoch,
                           best_metric=stopper.best, best_step=stopper.best_step,
                           best_checkpoint=best, last_checkpoint=last_ckpt,
                           stopped_early=stop, history=list(log.records))

    def _agreed_precision(self, ctx: DistContext) -> str:
        """The precision of the run, rank 0's on every rank (each rank's ``auto`` probe
        could differ)."""
        names = ("fp32", "bf16", "fp16")
        mine = torch.tensor([names.index(self.precision.precision)])
        return names[int(broadcast_from_main(mine, ctx)[0])]

    def _step(self, net: nn.Module, window: list[Mapping[str, Any]],
              optimizer: torch.optim.Optimizer, amp: MixedPrecision, ctx: DistContext,
              meter: StepMeter) -> torch.Tensor:
        """One optimizer update over the micro-batches of ``window``; returns the grad norm."""
        sizes = [batch_size_of(b) for b in window]
        tokens = sum(tokens_of(b) for b in window)
        counts = all_reduce_sum(torch.tensor([sum(sizes), tokens], dtype=torch.float64), ctx)
        n_global = float(counts[0])
        loss_sum = torch.zeros((), dtype=torch.float64, device=ctx.device)
        for i, (batch, n) in enumerate(zip(window, sizes, strict=True)):
            last = i == len(window) - 1
            sync = contextlib.nullcontext() if last or not ctx.is_distributed else net.no_sync()
            with sync:
                with amp.autocast():
                    loss = loss_of(net(**to_device(batch, ctx.device)))
                # mean per-example loss over the whole step; DDP then averages over ranks
                amp.backward(loss.float() * (n * ctx.world_size / n_global))
            loss_sum += loss.detach().double() * n
        amp.unscale_(optimizer)
        params = [p for g in optimizer.param_groups for p in g["params"]]
        if self.config.max_grad_norm is not None:
            norm = nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        else:
            grads = [p.grad.detach().float() for p in params if p.grad is not None]
            norm = (torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
                    if grads else torch.zeros(()))
        amp.step(optimizer)
        optimizer.zero_grad(set_to_none=True)
        meter.add(loss_sum, float(counts[0]), float(counts[1]))
        return norm

    def _evaluate_and_track(self, model: nn.Module, stopper: EarlyStopping, ctx: DistContext,
                            log: MetricsLog, step: int, epochs: float) -> tuple[bool, bool]:
        """Evaluate on rank 0, update early stopping; every rank learns (stop, improved)."""
        flags = torch.zeros(2, dtype=torch.int64)
        if ctx.is_main:
            metrics = self.evaluate(model)
            improved = stopper.update(metrics, step)
            log.write({"step": step, "epoch": epochs,
                       **{f"eval_{k}": v for k, v in metrics.items()}, "is_best": improved})
            flags = torch.tensor([int(stopper.should_stop), int(improved)])
        flags = broadcast_from_main(flags, ctx)
        return bool(flags[0]), bool(flags[1])

    # ------------------------------------------------------------------ checkpoints
    def _save(self, model: nn.Module, optimizer: torch.optim.Optimizer, schedule: LRSchedule,
              amp: MixedPrecision, stopper: EarlyStopping, meter: StepMeter, pos: _Position,
              ctx: DistContext, improved: bool) -> Path | None:
        """Write a checkpoint from rank 0 (a collective: RNG states are gathered)."""
        mine = torch_rng_states(ctx.device)
        gathered = {k: all_gather_equal(v, ctx) for k, v in mine.items()}
        meter_state = meter.state_dict(ctx)
        path = None
        if ctx.is_main:
            state = {
                "position": {"step": pos.step, "epoch": pos.epoch, "batch": pos.batch},
                "num_examples": len(self.lengths),
                "world_size": ctx.world_size,
                "config": self.config.to_dict(),
                "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict(),
                "scaler": amp.state_dict(),
                "early_stopping": stopper.state_dict(),
                "meter": meter_state,
                "rng": {"torch": [{k: v[r] for k, v in gathered.items()}
                                  for r in range(ctx.world_size)],
                        "host": host_rng_states()},
            }
            path = save_checkpoint(self.out_dir, pos.step, model.state_dict(), state)
            best = None
            if stopper.best_step is not None:
                best = self.out_dir / step_dir_name(stopper.best_step)
                if improved:
                    write_pointer(self.out_dir / BEST, best.name)
            prune_checkpoints(self.out_dir, self.config.keep_checkpoints,
                              protect=(path,) + ((best,) if best is not None else ()))
        barrier(ctx)
        return path

    def _restore(self, state: dict[str, Any], model_state: dict[str, torch.Tensor],
                 model: nn.Module, optimizer: torch.optim.Optimizer, schedule: LRSchedule,
                 amp: MixedPrecision, stopper: EarlyStopping, ctx: DistContext) -> _Position:
        """Load a checkpoint's state into the run's objects; return where to continue."""
        try:
            saved_cfg, position = state["config"], state["position"]
            num_examples = state["num_examples"]
        except (KeyError, TypeError) as e:
            raise CheckpointError(f"not a Trainer checkpoint (missing {e})") from e
        if num_examples != len(self.lengths):
            raise ValueError(f"the checkpoint was trained on {num_examples} examples, this "
                             f"run has {len(self.lengths)}")
        changed = [f for f in _DATA_ORDER_FIELDS if saved_cfg.get(f) != getattr(self.config, f)]
        if changed:
            raise ValueError(f"cannot resume: {changed} differ from the checkpoint's run, so "
                             "its data order cannot be continued")
        model.load_state_dict(model_state)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        amp.load_state_dict(state["scaler"])
        stopper.load_state_dict(state["early_stopping"])
        torch_states = state["rng"]["torch"]
        own = torch_states[ctx.rank] if len(torch_states) == ctx.world_size else torch_states[0]
        set_torch_rng_states(own, ctx.device)
        set_host_rng_states(state["rng"]["host"])
        return _Position(step=int(position["step"]), epoch=int(position["epoch"]),
                         batch=int(position["batch"]))

