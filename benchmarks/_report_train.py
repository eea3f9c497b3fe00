"""The report of ``benchmarks/train_throughput.py``: its section of ``BENCHMARKS.md``, computed
from a results JSON (``{"meta": ..., "records": [...]}``)."""

from __future__ import annotations

from typing import Any

import _harness as hx
import _verdicts as V

KEY = "train_throughput:cpu"
NAMES = {"ours": "headwise", "hf": "transformers"}


def _ok(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == kind and r.get("status") == "ok"]


def _name(r: dict[str, Any]) -> str:
    extra = f" {NAMES[r['impl']]}{' ckpt' if r['checkpointing'] else ''}" if "impl" in r else ""
    return f"{r['kind']} {r['model']} seq {r['seq']}{extra}"


def setup(meta: dict[str, Any]) -> str:
    """What was measured and how."""
    s = meta["settings"]
    return (
        f"One training step = forward, cross-entropy loss, backward, AdamW step "
        f"(`headwise.train.build_optimizer`, lr {meta['optim']['lr']:g}, weight decay "
        f"{meta['optim']['weight_decay']:g}, the same for both), `zero_grad(set_to_none=True)`; "
        f"no gradient clipping, no LR schedule. {meta['dtype']}, train mode, batch "
        f"{meta['batch']}, {meta['num_labels']} labels, random token ids; "
        f"{meta['pad_fraction']:.0%} of the rows are padded on the right to a random length in "
        f"[seq/4, seq) and both models get the `attention_mask`. Randomly initialised weights."
        f"\n\n- **headwise**: `EncoderClassifier(preset(model, num_labels={meta['num_labels']}, "
        f"dropout={meta['dropout']:g}, attention_dropout={meta['dropout']:g}))`. The presets' "
        f"attention dropout is 0.0; it is set to BERT's {meta['dropout']:g} here for a fair "
        f"comparison. Attention backend \"auto\" (SDPA for this shape). Pooling as the preset "
        f"says: mean of real tokens for minilm-l6, CLS for bert-base; no pooler layer. Like "
        f"BERT's, its feed-forward layers have no dropout inside (`activation_dropout` 0): 3 "
        f"dropouts per layer in both."
        f"\n- **transformers** {meta['machine'].get('transformers', '?')}: "
        f"`BertForSequenceClassification(BertConfig(same sizes, hidden_dropout_prob="
        f"{meta['dropout']:g}, attention_probs_dropout_prob={meta['dropout']:g}), "
        f"attn_implementation=\"sdpa\")` (SDPA is its default; chosen explicitly): CLS token "
        f"through its pooler (dense + tanh, one more d x d layer than ours)."
        f"\n\n**Throughput**: both models in one process, warm-up steps: {s['warmup']} each, "
        f"then rounds of one step of each, the one to go first alternating, {s['min_repeats']} "
        f"to {s['max_repeats']} rounds (until {s['target_s']:g} s of steps per model). "
        f"Step time: the median; tokens/s: tokens per step over it, counting padding "
        f"(batch x seq) and counting real tokens only (the `attention_mask`'s ones). "
        f"headwise/transformers: the median of the per-round ratios of throughputs (the "
        f"transformers step's time over the headwise step's; > 1: headwise faster), with "
        f"quartiles.\n\n**Memory**: each model in its own process, with and without gradient "
        f"checkpointing (headwise: `set_gradient_checkpointing(True)`, each encoder layer; "
        f"transformers: `activation_checkpointing_enable` / `gradient_checkpointing_enable`, "
        f"each layer; both `use_reentrant=False`). After warm-up steps ({s['warmup']}; AdamW "
        f"state allocated), peak = VmHWM during one step (reset through `/proc/self/clear_refs`) "
        f"minus VmRSS before it (after `gc` and `malloc_trim`): activations, gradients and "
        f"temporaries of the step; \"held before\" (weights, AdamW state, libraries) is given "
        f"apart. The step times of the memory table: the median of {s['mem_steps']} steps in that "
        f"process, not interleaved: a rough cost of the recomputation.")


def speed_table(rows: list[dict[str, Any]]) -> str:
    """One row per (model, seq): step times, tokens/s, the ratio."""
    out = []
    for r in rows:
        o, h = r["ms"]["ours"]["median"], r["ms"]["hf"]["median"]
        sp = r["speedup"]
        out.append([r["model"], r["seq"], hx.fmt(o), hx.fmt(h),
                    hx.fmt(r["tokens_padded"] / o * 1e3), hx.fmt(r["tokens_padded"] / h * 1e3),
                    hx.fmt(r["tokens_real"] / o * 1e3), hx.fmt(r["tokens_real"] / h * 1e3),
                    f"{sp['median']:.3f} [{sp['q1']:.3f}, {sp['q3']:.3f}]", sp["n"]])
    return hx.markdown_table(
        ["model", "seq", "headwise ms/step", "transformers ms/step", "headwise tok/s (padded)",
         "transformers tok/s (padded)", "headwise tok/s (real)", "transformers tok/s (real)",
         "headwise/transformers throughput [q1, q3]", "rounds"], out, "lrrrrrrrrr")


def memory_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, seq, impl): the records without and with checkpointing."""
    got: dict[tuple, dict[str, Any]] = {}
    for r in _ok(records, "memory"):
        got.setdefault((r["model"], r["seq"], r["impl"]), {})[r["checkpointing"]] = r
    return [{"model": m, "seq": s, "impl": i, "off": v.get(False), "on": v.get(True)}
            for (m, s, i), v in got.items()]


def memory_table(rows: list[dict[str, Any]]) -> str:
    """Peak of one step with and without checkpointing, the saving, the step times."""
    out = []
    for r in rows:
        off, on = r["off"], r["on"]
        cells = [r["model"], r["seq"], NAMES[r["impl"]]]
        cells += [hx.fmt(x["peak_mib"]) if x else "-" for x in (off, on)]
        cells.append(f"{1 - on['peak_mib'] / off['peak_mib']:.0%}" if off and on else "-")
        cells.append(hx.fmt(off["base_mib"]) if off else "-")
        cells += [hx.fmt(x["ms"]["median"]) if x else "-" for x in (off, on)]
        cells.append(f"{on['ms']['median'] / off['ms']['median']:.2f}x" if off and on else "-")
        out.append(cells)
    return hx.markdown_table(
        ["model", "seq", "implementation", "peak MiB", "peak MiB, checkpointing", "saving",
         "held before MiB", "ms/step", "ms/step, checkpointing", "time cost"], out,
        "lrlrrrrrrr")


def targets(data: dict[str, Any]) -> str:
    """The target table: throughput ours >= HF; the checkpointing saving (measured only)."""
    speed = _ok(data["records"], "speed")
    planned = [r for r in data["records"] if r["kind"] == "speed"]
    # per shape, transformers' time over ours per interleaved round (> 1: ours faster), with
    # its 95 % interval; the target holds where the interval clears 1.00 (the protocol)
    ratios = {f"{r['model']} seq {r['seq']}": V.ratio_interval(r["times_s"]["hf"],
                                                               r["times_s"]["ours"])
              for r in speed}
    verdicts = [V.judge(iv, 1.0) for iv in ratios.values()]
    if speed:
        ev = "; ".join(f"{k}: {iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
                       for k, iv in ratios.items())
        ev = (f"throughput ratio ours / transformers, the geometric mean of interleaved "
              f"rounds [95 %]: {ev}")
    else:
        ev = "no configuration measured"
    if not verdicts:
        overall = "NOT MEASURED"
    elif any(v == "FAIL" for v in verdicts):
        overall = "FAIL"
    elif all(v == "PASS" for v in verdicts):
        overall = "PASS" if len(speed) >= len(planned) else "PASS (incomplete)"
    else:
        overall = "within noise"
    mem = [r for r in memory_rows(data["records"]) if r["off"] and r["on"]]
    saving = "; ".join(f"{NAMES[r['impl']]} {r['model']} seq {r['seq']}: "
                       f"{hx.fmt(r['off']['peak_mib'])} -> {hx.fmt(r['on']['peak_mib'])} MiB "
                       f"({1 - r['on']['peak_mib'] / r['off']['peak_mib']:.0%} less)"
                       for r in mem) or "not measured"
    return hx.markdown_table(["target", "verdict", "measured"], [
        ["training throughput of headwise at least that of transformers (at every shape, the "
         "95 % interval of the per-round ratio at or above 1.00)", overall, ev],
        ["peak memory of a step with gradient checkpointing vs without", "(reported)",
         saving]], "lll")


def section(data: dict[str, Any]) -> str:
    """The markdown section (without its markers)."""
    meta, records = data["meta"], data["records"]
    parts = [f"## Training throughput on {meta['device']}: EncoderClassifier vs "
             f"transformers' BertForSequenceClassification", hx.provenance(meta), setup(meta),
             "### Targets", targets(data)]
    speed = _ok(records, "speed")
    if speed:
        parts += ["### Throughput (interleaved in one process)", speed_table(speed)]
        parts.append("Parameters: " + "; ".join(
            f"{r['model']}: headwise {r['params']['ours'] / 1e6:.2f} M, transformers "
            f"{r['params']['hf'] / 1e6:.2f} M" for r in speed if r["seq"] == speed[0]["seq"]
        ) + ". Loss of the first step (same batch; the initialisations differ): " + "; ".join(
            f"{r['model']} seq {r['seq']}: {r['first_loss']['ours']:.3f} / "
            f"{r['first_loss']['hf']:.3f}" for r in speed) + ".")
    mem = memory_rows(records)
    if mem:
        parts += ["### Peak memory of one training step (one process per row and setting)",
                  memory_table(mem)]
    missing = hx.not_measured(records, _name)
    if missing:
        parts += ["### Not measured", "\n".join(missing)]
    return "\n\n".join(parts)
