"""English -> Chinese translation end to end: train ``EncoderDecoder`` on Tatoeba pairs
within a time budget on the CPU, then score the held-out test split with BLEU and chrF.

Data: ``../shared/data/tatoeba_cmn_eng/cmn.txt`` (TSV ``english<TAB>chinese<TAB>
attribution``, read in place, never copied), split 90/5/5 train/valid/test by a SHA-256
hash of the normalised English side (``headwise.text.pairs``), so every pair of one
English sentence lands in one split. Separate WordPiece vocabularies for English and
Chinese (character level), learnt on the training split only (``_translate_data.py``).

Model: the "Attention Is All You Need" encoder-decoder (``preset("transformer-base")``)
made small enough for about an hour on two CPU cores (default 3+3 layers, d_model 256,
4 heads, d_ff 1024, pre-norm, dropout 0.3; options below). Training: the project's
``Trainer`` (AdamW, linear warmup then cosine decay, label smoothing 0.1, gradient
clipping), validated once an epoch on the per-token cross-entropy (no smoothing); the
checkpoint with the best validation loss is kept, and training stops after ``--patience``
epochs without improvement. The number of steps is planned from a timed calibration (a
throwaway model: ``--calibrate-s`` of training steps, one validation pass, one checkpoint
write) so that the cosine schedule ends within ``--budget-min``; should the machine slow
down, the run stops cleanly at the budget all the same. Then the best weights translate
the test split greedily and with beam search (beam 4, length penalty 1.0), scored by
sacrebleu (BLEU with ``tokenize="zh"``, chrF).

Usage::

    python benchmarks/translate.py                 # ~1 h; writes BENCHMARKS.md, JSON, PNG
    python benchmarks/translate.py --quick --out /tmp/tq --md /tmp/BENCH.md   # ~1 min
    python benchmarks/translate.py --measure-only --calibrate-s 30   # steps/s, nothing else
    python benchmarks/translate.py --render benchmarks/results/translate_cpu.json

Writes ``<out>/translate_cpu.json``, ``<out>/translate_cpu.png`` and the section between
``<!-- translate:cpu:begin/end -->`` of ``docs/benchmarks/translate.md`` (summed up in
``BENCHMARKS.md``); checkpoints and the final model
(``save_model`` plus both tokenizers) go to ``--work-dir`` (default: a new temp folder).
Needs the ``bench`` extra (``pip install -e '.[bench]'``: sacrebleu).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as hx
import _translate_data as td
import _translate_report as report

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "tatoeba_cmn_eng" / "cmn.txt"
DEFAULT_MD = ROOT / "BENCHMARKS.md"
KEY = "translate:cpu"
SAFETY = 0.97  # share of the budget the planned steps may fill
QUICK = dict(subsample=600, src_vocab=600, tgt_vocab=900, layers=2, d_model=64, heads=4,
             d_ff=128, dropout=0.1, batch_size=32, lr=2e-3, warmup=20, budget_min=0.5,
             calibrate_s=3.0, patience=None, log_every=5)


# --- set-up ----------------------------------------------------------------------------------
def model_config(args: argparse.Namespace, src_tok: Any, tgt_tok: Any) -> Any:
    """The encoder-decoder's config: transformer-base's recipe at the chosen size."""
    from headwise.models.config import preset

    return preset("transformer-base", vocab_size=src_tok.vocab_size, d_model=args.d_model,
                  num_layers=args.layers, num_decoder_layers=args.decoder_layers or args.layers,
                  num_heads=args.heads, d_ff=args.d_ff, dropout=args.dropout, norm_first=True,
                  max_position=128, pad_token_id=tgt_tok.pad_token_id,
                  bos_token_id=tgt_tok.cls_token_id, eos_token_id=tgt_tok.sep_token_id,
                  extra={"target_vocab_size": tgt_tok.vocab_size})


def calibrate(cfg: Any, train: list[dict], valid: list[dict], args: argparse.Namespace
              ) -> dict[str, float]:
    """Mean seconds per training step (over ``args.calibrate_s`` after a warm-up of at
    least 3 steps and ``min(2, calibrate_s / 4)`` seconds; batches drawn as the Trainer
    draws them), per validation pass and per checkpoint write,
    measured on a throwaway model of the same config."""
    import torch
    from torch.utils.data import DataLoader

    from headwise.models.seq2seq import EncoderDecoder
    from headwise.text import LengthBucketSampler
    from headwise.train import build_optimizer, save_checkpoint

    torch.manual_seed(args.seed + 1)
    model = EncoderDecoder(cfg).train()
    opt = build_optimizer(model, lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.98),
                          eps=1e-8)
    collate = td.Seq2SeqCollate(cfg.pad_token_id, args.label_smoothing)
    sampler = LengthBucketSampler([len(e["input_ids"]) for e in train], args.batch_size,
                                  seed=args.seed + 1)

    def batches() -> Any:
        for epoch in range(10**6):
            sampler.set_epoch(epoch)
            for idx in sampler:
                yield collate([train[i] for i in idx])

    def step(batch: dict[str, Any]) -> None:
        loss = model(**batch)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    it, warm, start = batches(), 0, time.perf_counter()
    while warm < 3 or time.perf_counter() - start < min(2.0, args.calibrate_s / 4):
        step(next(it))  # lazy initialisation makes the first steps up to ~1 s slower
        warm += 1
    steps, start = 0, time.perf_counter()
    while steps < 5 or time.perf_counter() - start < args.calibrate_s:
        step(next(it))
        steps += 1
    step_s = (time.perf_counter() - start) / steps
    loader = DataLoader(valid, batch_size=args.batch_size, collate_fn=collate)
    start = time.perf_counter()
    model.eval()
    with torch.no_grad():
        td.token_nll(model, loader)
    eval_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        save_checkpoint(tmp, 1, model.state_dict(), {"optimizer": opt.state_dict()})
        save_s = time.perf_counter() - start
    return {"step_s": step_s, "steps_per_s": 1 / step_s, "timed_steps": steps,
            "eval_s": eval_s, "save_s": save_s}


def plan_steps(cal: dict[str, float], budget_s: float, eval_every: int) -> int:
    """Optimizer steps that fit ``SAFETY`` of the budget, validation passes and checkpoint
    writes (one of each per ``eval_every`` steps) included."""
    per_step = cal["step_s"] + (cal["eval_s"] + cal["save_s"]) / eval_every
    return max(1, math.floor(SAFETY * budget_s / per_step))


# --- training --------------------------------------------------------------------------------
def train(cfg: Any, train_ex: list[dict], valid_ex: list[dict], args: argparse.Namespace,
          max_steps: int, eval_every: int, work: Path) -> tuple[Any, dict[str, Any]]:
    """Train with the project's Trainer until the plan, early stopping or the budget ends
    it; return the model holding the best validation weights, and the training facts."""
    import torch

    from headwise.models.seq2seq import EncoderDecoder
    from headwise.train import TrainConfig, Trainer, load_model_weights
    from headwise.train.checkpoint import BEST, read_pointer

    torch.manual_seed(args.seed)
    model = EncoderDecoder(cfg)
    tc = TrainConfig(lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.98),
                     max_steps=max_steps, batch_size=args.batch_size,
                     warmup_steps=min(args.warmup, max(1, max_steps // 10)), schedule="cosine",
                     max_grad_norm=1.0, seed=args.seed, eval_every=eval_every,
                     patience=args.patience, keep_checkpoints=1, log_every=1,
                     device="cpu", progress=not args.quick)
    start = time.monotonic()
    collate = td.Seq2SeqCollate(cfg.pad_token_id, args.label_smoothing,
                                deadline=start + args.budget_min * 60)
    trainer = Trainer(model, tc, train_ex, valid_data=valid_ex, collate_fn=collate,
                      evaluate_fn=td.token_nll, out_dir=work / "checkpoints")
    stopped_by = "planned steps done"
    try:
        result = trainer.train()
        if result.stopped_early:
            stopped_by = f"early stopping (patience {args.patience})"
    except td.BudgetSpent:
        stopped_by = f"time budget ({args.budget_min:g} min)"
    wall = time.monotonic() - start
    records = [json.loads(ln) for ln in (work / "checkpoints" / "metrics.jsonl")
               .read_text(encoding="utf-8").splitlines() if ln.strip()]
    evals = [r for r in records if "eval_loss" in r]
    steps = [r for r in records if "eval_loss" not in r]  # one line per step: exact counts
    best_path = read_pointer(work / "checkpoints" / BEST)
    if best_path is None:
        raise RuntimeError(f"training ended ({stopped_by}) before the first validation: "
                           "no best checkpoint")
    load_model_weights(best_path, model)
    best = min(evals, key=lambda r: r["eval_loss"])
    last = steps[-1]
    history = [window_mean(steps[i: i + args.log_every])
               for i in range(0, len(steps), args.log_every)]
    history = sorted(history + evals, key=lambda r: (r["step"], "eval_loss" in r))
    facts = {"steps": last["step"], "planned_steps": max_steps, "epochs": last["epoch"],
             "wall_s": wall, "steps_per_s": last["step"] / wall, "stopped_by": stopped_by,
             "eval_every": eval_every, "train_config": tc.to_dict(),
             "best_step": best["step"], "best_epoch": best["epoch"],
             "best_valid_loss": best["eval_loss"], "best_valid_ppl": best["eval_ppl"],
             "history": history}
    return model.eval(), facts


def window_mean(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """One history record for consecutive per-step metrics lines: the mean training loss
    and gradient norm, the step, epoch and learning rate of the last one."""
    return {"step": lines[-1]["step"], "epoch": lines[-1]["epoch"], "lr": lines[-1]["lr"],
            "loss": sum(r["loss"] for r in lines) / len(lines),
            "grad_norm": sum(r["grad_norm"] for r in lines) / len(lines), "steps": len(lines)}


# --- scoring ---------------------------------------------------------------------------------
def score(model: Any, src_tok: Any, tgt_tok: Any, test: list[Any], args: argparse.Namespace
          ) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Translate every distinct test source greedily and with beam search; BLEU (zh) and
    chrF against each pair's reference (one line per pair) and against all references of
    a source (one line per source); sentences per second."""
    import sacrebleu

    sources = list(dict.fromkeys(p.source for p in test))
    refs_of: dict[str, list[str]] = {}
    for p in test:
        refs_of.setdefault(p.source, []).append(p.target)
    out: dict[str, Any] = {"pairs": len(test), "sources": len(sources),
                           "max_refs": max(map(len, refs_of.values()))}
    hyps: dict[str, list[str]] = {}
    for name, beams in (("greedy", 1), ("beam", args.beams)):
        print(f"translate: decoding {len(sources)} test sources, {name}", file=sys.stderr)
        got, seconds = td.translate(model, src_tok, tgt_tok, sources, num_beams=beams,
                                    length_penalty=args.length_penalty,
                                    batch_size=args.decode_batch, max_len=args.max_len)
        by_src = dict(zip(sources, got, strict=True))
        per_pair = [by_src[p.source] for p in test]
        bleu, chrf = sacrebleu.BLEU(tokenize="zh"), sacrebleu.CHRF()
        b = bleu.corpus_score(per_pair, [[p.target for p in test]])
        c = chrf.corpus_score(per_pair, [[p.target for p in test]])
        streams = [[refs_of[s][k] if k < len(refs_of[s]) else None for s in sources]
                   for k in range(out["max_refs"])]
        multi = sacrebleu.BLEU(tokenize="zh").corpus_score(got, streams)
        out[name] = {"num_beams": beams, "bleu": b.score, "bleu_detail": str(b),
                     "bleu_signature": str(bleu.get_signature()), "chrf": c.score,
                     "chrf_signature": str(chrf.get_signature()), "bleu_multi_ref": multi.score,
                     "seconds": seconds, "sentences_per_s": len(sources) / seconds}
        hyps[name] = per_pair
    return out, hyps


def examples(test: list[Any], hyps: dict[str, list[str]], count: int = 10) -> list[dict]:
    """``count`` test pairs evenly spaced through the split (the file runs from short to
    long sentences), with both translations and the pair's attribution."""
    n = len(test)
    picks = sorted({round(i * (n - 1) / max(count - 1, 1)) for i in range(min(count, n))})
    return [{"source": test[i].source, "reference": test[i].target,
             "greedy": hyps["greedy"][i], "beam": hyps["beam"][i],
             "attribution": test[i].attribution, "line": test[i].line} for i in picks]


# --- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = p.add_argument
    add("--data", type=Path, default=DEFAULT_DATA, help="the Tatoeba TSV (english, chinese, "
        "attribution)")
    add("--budget-min", type=float, default=55.0, help="training time budget (default 55)")
    add("--quick", action="store_true", help="600 pairs, a tiny model, ~1 min (smoke test)")
    add("--measure-only", action="store_true", help="print the calibration (steps/s) and stop")
    add("--threads", type=int, default=2, help="torch threads (default 2)")
    add("--seed", type=int, default=0)
    add("--split-salt", default="", help="salt of the hash split (default none)")
    add("--src-vocab", type=int, default=8000, help="English WordPiece vocabulary")
    add("--tgt-vocab", type=int, default=4000, help="Chinese vocabulary (characters mostly)")
    add("--max-len", type=int, default=64, help="tokens per side, special ones included")
    add("--layers", type=int, default=3, help="encoder layers (default 3)")
    add("--decoder-layers", type=int, default=None, help="decoder layers (default: --layers)")
    add("--d-model", type=int, default=256)
    add("--heads", type=int, default=4)
    add("--d-ff", type=int, default=1024)
    add("--dropout", type=float, default=0.3)
    add("--label-smoothing", type=float, default=0.1)
    add("--batch-size", type=int, default=64)
    add("--lr", type=float, default=7e-4, help="peak learning rate (default 7e-4)")
    add("--weight-decay", type=float, default=0.01)
    add("--warmup", type=int, default=800, help="warmup steps (at most 10 %% of the run)")
    add("--patience", type=int, default=6, help="epochs without a better validation loss "
        "before stopping (default 6)")
    add("--max-steps", type=int, default=None, help="override the planned step count")
    add("--calibrate-s", type=float, default=30.0, help="seconds of timed training steps")
    add("--log-every", type=int, default=50, help="steps averaged per training-loss point "
        "of the results (default 50)")
    add("--beams", type=int, default=4)
    add("--length-penalty", type=float, default=1.0)
    add("--decode-batch", type=int, default=64)
    add("--work-dir", type=Path, default=None, help="checkpoints and the final model "
        "(default: a new temp folder)")
    add("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    add("--md", type=Path, default=DEFAULT_MD, help="the markdown file to write the section to")
    add("--no-write", action="store_true", help="print the section, leave the markdown alone")
    add("--render", type=Path, default=None, help="redo plot and section from a results JSON")
    args = p.parse_args(argv)
    args.subsample = None
    if args.quick:
        defaults = {a.dest: a.default for a in p._actions}
        for k, v in QUICK.items():  # tiny settings, unless the option was given
            if getattr(args, k, None) == defaults.get(k):
                setattr(args, k, v)
        args.subsample = QUICK["subsample"]
        if args.out == DEFAULT_OUT:
            args.out = Path(tempfile.mkdtemp(prefix="translate-quick-"))
        if args.md.resolve() == DEFAULT_MD and not args.no_write:
            p.error("--quick numbers are not published: pass --md /tmp/... or --no-write")
    return args


def main(argv: list[str] | None = None) -> int:
    """Prepare the data, calibrate, train, translate, score, publish."""
    args = parse_args(argv)
    md = None if args.no_write else args.md
    if args.render is not None:
        data = json.loads(args.render.read_text())
        if data["meta"]["settings"].get("quick") and md is not None and \
                md.resolve() == DEFAULT_MD:
            sys.exit("--render: these are --quick numbers, not published; add --no-write")
        report.render(data, args.render.parent, md, None)
        return 0
    if not args.measure_only:
        try:
            import sacrebleu  # noqa: F401
        except ImportError:
            sys.exit("translate.py needs sacrebleu: pip install -e '.[bench]'")
    import torch

    torch.set_num_threads(args.threads)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                if k not in ("out", "render", "md", "work_dir")}
    meta = hx.results_meta("cpu", args.threads, settings)
    t0 = time.perf_counter()
    splits, in_file = td.load_splits(args.data, subsample=args.subsample, salt=args.split_salt)
    src_tok, tgt_tok = td.train_tokenizers(splits["train"], args.src_vocab, args.tgt_vocab)
    train_ex = td.encode_pairs(splits["train"], src_tok, tgt_tok, args.max_len)
    valid_ex = td.encode_pairs(splits["valid"], src_tok, tgt_tok, args.max_len)
    cfg = model_config(args, src_tok, tgt_tok)
    prep_s = time.perf_counter() - t0
    print(f"translate: {({k: len(v) for k, v in splits.items()})} pairs, vocab "
          f"{src_tok.vocab_size} + {tgt_tok.vocab_size}, prepared in {prep_s:.1f} s",
          file=sys.stderr)
    cal = calibrate(cfg, train_ex, valid_ex, args)
    eval_every = math.ceil(len(train_ex) / args.batch_size)  # once an epoch
    planned = args.max_steps or plan_steps(cal, args.budget_min * 60, eval_every)
    print(f"translate: {cal['steps_per_s']:.2f} steps/s (batch {args.batch_size}), "
          f"validation {cal['eval_s']:.1f} s, checkpoint {cal['save_s']:.2f} s -> "
          f"{planned} steps ({planned / eval_every:.1f} epochs) in {args.budget_min:g} min",
          file=sys.stderr)
    if args.measure_only:
        print(json.dumps({"calibration": cal, "planned_steps": planned,
                          "epochs": planned / eval_every}))
        return 0
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="translate-"))
    model, facts = train(cfg, train_ex, valid_ex, args, planned, eval_every, work)
    from headwise.models.io import save_model

    save_model(model, work / "model")
    src_tok.save(work / "model" / "source_tokenizer")
    tgt_tok.save(work / "model" / "target_tokenizer")
    print(f"translate: best model (step {facts['best_step']}) saved to {work / 'model'}",
          file=sys.stderr)
    with torch.inference_mode():
        test, hyps = score(model, src_tok, tgt_tok, splits["test"], args)
    meta["wall_min"] = (time.perf_counter() - t0) / 60
    data = {"meta": meta, "data": {
        "path": str(args.data), "pairs_in_file": in_file,
        "split": {k: len(v) for k, v in splits.items()},
        "sources": {k: len({p.source for p in v}) for k, v in splits.items()},
        "salt": args.split_salt}, "prep_s": prep_s,
        "tokenizers": {"source_vocab": src_tok.vocab_size, "target_vocab": tgt_tok.vocab_size},
        "model": cfg.to_dict(), "parameters": sum(p.numel() for p in model.parameters()),
        "calibration": cal, "train": facts, "test": test,
        "examples": examples(splits["test"], hyps), "work_dir": str(work)}
    args.out.mkdir(parents=True, exist_ok=True)
    report.render(data, args.out, md, args.out / "translate_cpu.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
