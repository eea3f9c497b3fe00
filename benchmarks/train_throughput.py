"""Training throughput of ``EncoderClassifier`` against ``transformers``' BERT classifier.

One training step (forward, cross-entropy loss, backward, AdamW step, ``zero_grad``) of
``EncoderClassifier(preset("minilm-l6", num_labels=77, dropout=0.1, attention_dropout=0.1))``
and of ``BertForSequenceClassification`` with the same shape (6 layers, d 384, 12 heads,
d_ff 1536, vocab 30522; BERT-base too with ``--full``), float32, train mode, batch 32 x
sequence 64 and 128 of random token ids with ~30 % of the rows padded. Both get the same
batch and the same optimizer (``headwise.train.build_optimizer``). Two kinds of worker
process, each configuration in its own (machinery: ``_harness.py``; report:
``_report_train.py``):

* speed: both models in one process, steps interleaved (the one to go first alternating
  each round) after a warm-up; medians of the per-step times and of the per-round ratios;
* memory: one model per process, with or without gradient checkpointing; the peak resident
  memory (VmHWM) of one step above what the process held before it (weights, AdamW state).

Usage::

    python benchmarks/train_throughput.py           # MiniLM-L6 shape; writes BENCHMARKS.md
    python benchmarks/train_throughput.py --full    # also the BERT-base shape
    python benchmarks/train_throughput.py --quick --no-write   # smoke test (results: a temp dir)
    python benchmarks/train_throughput.py --render benchmarks/results/train_throughput_cpu.json

Writes ``<out>/train_throughput_cpu.json`` and the section between
``<!-- train_throughput:cpu:begin/end -->`` of ``docs/benchmarks/training.md`` (summed up
in ``BENCHMARKS.md``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _harness as hx
import _report_train as report

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results"
MODELS = ("minilm-l6", "bert-base")
SEQS = (64, 128)
BATCH, NUM_LABELS, DROPOUT, PAD_FRACTION = 32, 77, 0.1, 0.3
OPTIM = {"lr": 5e-4, "weight_decay": 0.01, "betas": (0.9, 0.999), "eps": 1e-8}  # TrainConfig's
IMPLS = ("ours", "hf")


# --- models and one training step ------------------------------------------------------------
def make_batch(batch: int, seq: int, vocab: int, seed: int = 0) -> dict[str, Any]:
    """Random token ids (above BERT's special ids), ``PAD_FRACTION`` of the rows padded on
    the right to a random length in [seq/4, seq), random labels."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, vocab, (batch, seq), generator=g)
    lengths = torch.full((batch,), seq)
    rows = torch.randperm(batch, generator=g)[: round(PAD_FRACTION * batch)]
    lengths[rows] = torch.randint(seq // 4, seq, (len(rows),), generator=g)
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    return {"input_ids": ids.masked_fill(mask == 0, 0), "attention_mask": mask,
            "labels": torch.randint(0, NUM_LABELS, (batch,), generator=g)}


def our_config(model: str) -> Any:
    """The headwise config: the preset, 77 labels, dropout 0.1 and attention dropout 0.1
    (the preset's attention dropout is 0.0; BERT's is 0.1)."""
    from headwise.models.config import preset

    return preset(model, num_labels=NUM_LABELS, dropout=DROPOUT, attention_dropout=DROPOUT)


def build(impl: str, model: str, checkpointing: bool = False, seed: int = 0) -> Any:
    """Our ``EncoderClassifier`` or HF's ``BertForSequenceClassification`` of the same
    shape (HF: ``attn_implementation="sdpa"``), in train mode."""
    import torch

    torch.manual_seed(seed)
    c = our_config(model)
    if impl == "ours":
        from headwise.models.encoder import EncoderClassifier

        net = EncoderClassifier(c)
        net.set_gradient_checkpointing(checkpointing)
    else:
        from transformers import BertConfig, BertForSequenceClassification

        hc = BertConfig(vocab_size=c.vocab_size, hidden_size=c.d_model,
                        num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
                        intermediate_size=c.d_ff, hidden_act="gelu",
                        hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT,
                        max_position_embeddings=c.max_position, type_vocab_size=c.type_vocab_size,
                        layer_norm_eps=c.norm_eps, num_labels=NUM_LABELS, pad_token_id=0,
                        attn_implementation="sdpa")
        net = BertForSequenceClassification(hc)
        if net.config._attn_implementation != "sdpa":  # noqa: SLF001
            raise RuntimeError(f"transformers chose {net.config._attn_implementation!r}")
        if checkpointing:
            hf_checkpointing(net)
    return net.train()


def hf_checkpointing(net: Any) -> None:
    """HF gradient checkpointing, non-reentrant like ours (``activation_checkpointing_enable``
    where this ``transformers`` has it, else the older ``gradient_checkpointing_enable``)."""
    kwargs = {"use_reentrant": False}
    if hasattr(net, "activation_checkpointing_enable"):
        net.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            net.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def make_step(net: Any, batch: dict[str, Any]) -> Callable[[], float]:
    """One training step of ``net`` on ``batch`` with a fresh AdamW; returns the loss."""
    from headwise.train import build_optimizer

    opt = build_optimizer(net, **OPTIM)

    def step() -> float:
        loss = net(**batch)["loss"]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())
    return step


def n_params(net: Any) -> int:
    """Parameters of ``net`` (HF's count includes its pooler layer)."""
    return sum(p.numel() for p in net.parameters())


def vmhwm_mib() -> float:
    """This process's resident high-water mark (VmHWM of ``/proc/self/status``) in MiB."""
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024


# --- workers ---------------------------------------------------------------------------------
def interleave(fns: dict[str, Callable[[], Any]], sync: Callable[[], None], warmup: int,
               min_rounds: int, max_rounds: int, target_s: float) -> dict[str, list[float]]:
    """``warmup`` untimed calls of each, then rounds of one timed call of each (the first
    rotating each round) until ``min_rounds`` and ``target_s`` seconds per function, at
    most ``max_rounds``. Returns the seconds of every timed call, per name."""
    names = list(fns)
    for _ in range(warmup):
        for k in names:
            fns[k]()
    times: dict[str, list[float]] = {k: [] for k in names}
    while (n := len(times[names[0]])) < max_rounds and (
            n < min_rounds or sum(map(sum, times.values())) < target_s * len(names)):
        i = n % len(names)
        for k in names[i:] + names[:i]:
            times[k].append(hx.timed(fns[k], sync))
    return times


def speed_worker(spec: dict[str, Any], sync: Callable[[], None]) -> dict[str, Any]:
    """Both models, same batch, interleaved steps."""
    batch = make_batch(BATCH, spec["seq"], our_config(spec["model"]).vocab_size)
    nets = {impl: build(impl, spec["model"]) for impl in IMPLS}
    steps = {impl: make_step(net, batch) for impl, net in nets.items()}
    first_loss = {impl: steps[impl]() for impl in IMPLS}  # also the first warm-up step
    times = interleave(steps, sync, spec["warmup"] - 1, spec["min_repeats"],
                       spec["max_repeats"], spec["target_s"])
    speedup = [h / o for o, h in zip(times["ours"], times["hf"], strict=True)]
    return {"status": "ok", "ms": {k: hx.summarize(t, 1e3) for k, t in times.items()},
            "times_s": times, "speedup": hx.summarize(speedup), "first_loss": first_loss,
            "params": {k: n_params(v) for k, v in nets.items()},
            "tokens_padded": int(batch["input_ids"].numel()),
            "tokens_real": int(batch["attention_mask"].sum())}


def memory_worker(spec: dict[str, Any], sync: Callable[[], None]) -> dict[str, Any]:
    """One model (checkpointing on or off): warm-up steps, then the peak of one step above
    the resident memory before it, then a few more steps timed (for the cost of
    recomputation; not interleaved)."""
    batch = make_batch(BATCH, spec["seq"], our_config(spec["model"]).vocab_size)
    net = build(spec["impl"], spec["model"], spec["checkpointing"])
    step = make_step(net, batch)
    for _ in range(spec["warmup"]):
        step()
    mem = hx.PeakMemory(spec["device"])
    with mem:
        times = [hx.timed(step, sync)]
    hwm = vmhwm_mib()  # the step's high-water mark; minus the peak: what was held before it
    while len(times) < spec["mem_steps"]:
        times.append(hx.timed(step, sync))
    return {"status": "ok", "peak_mib": mem.peak_mib, "base_mib": hwm - mem.peak_mib,
            "ms": hx.summarize(times, 1e3), "params": n_params(net)}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one configuration (``spec["kind"]``: "speed" or "memory") in this process."""
    import torch  # noqa: F401

    import headwise.models.encoder  # noqa: F401  (imported before the memory cap)

    if spec["kind"] == "speed" or spec["impl"] == "hf":
        import transformers  # noqa: F401

    body = speed_worker if spec["kind"] == "speed" else memory_worker
    return hx.in_worker(spec, lambda dev, sync: body(spec, sync))


# --- plan and main ---------------------------------------------------------------------------
def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The speed configurations, then the memory ones."""
    common = {k: getattr(args, k) for k in ("device", "threads", "mem_limit_gib", "warmup",
                                              "min_repeats", "max_repeats", "target_s",
                                              "mem_steps")}
    items: list[dict[str, Any]] = []
    for model in args.models:
        for seq in args.seqs:
            items.append({"kind": "speed", "model": model, "seq": seq})
    if args.memory:
        for model in args.models:
            for seq in args.seqs:
                for impl in IMPLS:
                    for ckpt in (False, True):
                        items.append({"kind": "memory", "model": model, "seq": seq,
                                      "impl": impl, "checkpointing": ckpt})
    for it in items:
        it["spec"] = {**common, **it}
    return items


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    ints = lambda s: tuple(int(x) for x in s.split(","))  # noqa: E731
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Here a repeat is a round (one step of "
        "each model); defaults: --min-repeats 7, --max-repeats 25, --target-s 40 (seconds of "
        "steps per model), --timeout 1800.")
    hx.add_common_args(p, DEFAULT_OUT)
    p.set_defaults(min_repeats=7, max_repeats=25, target_s=40.0, timeout=1800.0)
    add = p.add_argument
    add("--full", action="store_true", help="also the BERT-base shape (~8x the compute)")
    add("--models", default=None, help=f"comma-separated presets (default minilm-l6; "
        f"--full: {','.join(MODELS)})")
    add("--seqs", type=ints, default=SEQS, help="sequence lengths (default 64,128)")
    add("--warmup", type=int, default=2, help="untimed steps of each model first (default 2)")
    add("--mem-steps", type=int, default=3, help="steps timed in each memory worker (default 3)")
    add("--no-memory", dest="memory", action="store_false", help="skip the memory workers")
    args = p.parse_args(argv)
    if args.device != "cpu":
        p.error("only --device cpu is implemented (the section is train_throughput:cpu)")
    models = args.models.split(",") if args.models else (MODELS if args.full else MODELS[:1])
    if set(models) - set(MODELS):
        p.error(f"--models: choose from {MODELS}")
    args.models = tuple(models)
    if args.quick:
        args.seqs = args.seqs[:1] if args.seqs == SEQS else args.seqs
        args.min_repeats, args.max_repeats, args.target_s = 2, 2, 0.0
        args.warmup, args.mem_steps = 1, 1
        quick_guard(p, args)
    return args


def quick_guard(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Smoke-test numbers are never published: --quick needs --no-write and, without an
    explicit --out, writes its JSON to a temporary folder."""
    if not args.no_write:
        p.error("--quick numbers are not published: add --no-write")
    if args.out == DEFAULT_OUT:
        args.out = Path(tempfile.mkdtemp(prefix="train-throughput-quick-"))


def main(argv: list[str] | None = None) -> int:
    """Run the plan (or one worker), save the JSON, write the section."""
    args = parse_args(argv)
    md = None if args.no_write else ROOT / "BENCHMARKS.md"
    if hx.worker_or_render(args, worker, lambda data: hx.publish(
            None, data, md, report.KEY, lambda d: report.section(data)), md is not None):
        return 0
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "render", "worker")}
    meta = hx.results_meta(args.device, args.threads, settings)
    meta.update(batch=BATCH, num_labels=NUM_LABELS, dropout=DROPOUT, pad_fraction=PAD_FRACTION,
                optim=OPTIM, dtype="float32")
    import transformers

    meta["machine"]["transformers"] = transformers.__version__
    start = time.perf_counter()
    env = {"OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    records = hx.run_grid(Path(__file__), plan(args), args.timeout, env, "train")
    meta["wall_min"] = (time.perf_counter() - start) / 60
    data = {"meta": meta, "records": records}
    hx.publish(args.out / "train_throughput_cpu.json", data, md, report.KEY,
               lambda d: report.section(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
