"""Report of ``translate.py``: the loss-curve plot and the BENCHMARKS.md section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _harness as hx

KEY = "translate:cpu"
PNG = "translate_cpu.png"


def plot(path: Path, history: list[dict[str, Any]], best_step: int, smoothing: float,
         title: str) -> None:
    """Training loss (label-smoothed, per metrics line) and validation loss (per-token
    cross-entropy, unsmoothed) against the optimizer step; the best step marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    tr = [(r["step"], r["loss"]) for r in history if "loss" in r and "eval_loss" not in r]
    ev = [(r["step"], r["eval_loss"]) for r in history if "eval_loss" in r]
    if tr:
        ax.plot(*zip(*tr, strict=True), lw=1, color="C0", alpha=0.8,
                label=f"train loss (label smoothing {smoothing:g})")
    if ev:
        ax.plot(*zip(*ev, strict=True), marker="o", ms=3, color="C1",
                label="validation loss (cross-entropy per token)")
    ax.axvline(best_step, color="grey", ls="--", lw=1, label=f"best (step {best_step})")
    ax.set(xlabel="optimizer step", ylabel="nats per target token", title=title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "(empty)"


def section(data: dict[str, Any], png: Path, md_dir: Path) -> str:
    """The markdown section (without its markers)."""
    meta, s, m, tr, test = (data["meta"], data["meta"]["settings"], data["model"],
                            data["train"], data["test"])
    d, cal = data["data"], data["calibration"]
    layers = f"{m['num_layers']}+{m['num_decoder_layers']}"
    quick = "\n\n**Smoke test (`--quick`)**: a subsample and a tiny model; not a result." \
        if s.get("quick") else ""
    parts = [
        "## English -> Chinese translation (Tatoeba) on cpu", hx.provenance(meta) + quick,
        f"Data: `{Path(d['path']).name}` of Tatoeba via ManyThings.org ({d['pairs_in_file']} "
        f"pairs, CC BY 2.0 FR), read in place. Split 90/5/5 by a SHA-256 hash of the "
        f"normalised English side (`headwise.text.pairs.split_pairs`, salt "
        f"{d['salt']!r}), so every translation of one English sentence is in one split and "
        f"no test source was seen in training. The Chinese side mixes simplified and "
        f"traditional script (as Tatoeba does), which caps what any system scores against "
        f"a single reference.",
        hx.markdown_table(["split", "pairs", "distinct English sentences"],
                          [[k, n, d["sources"][k]] for k, n in d["split"].items()]),
        f"Tokenizers (trained on the training split only): English WordPiece, lowercased, "
        f"{data['tokenizers']['source_vocab']} pieces; Chinese WordPiece, cased, "
        f"{data['tokenizers']['target_vocab']} pieces (character level: the BERT pipeline "
        f"splits every CJK character). Two vocabularies rather than one shared: the "
        f"languages share almost no tokens, and the decoder's output softmax then spans "
        f"only the target's pieces (embeddings tied to the output projection).",
        f"Model: `EncoderDecoder`, transformer-base's recipe made small for the CPU: "
        f"{layers} layers, d_model {m['d_model']}, {m['num_heads']} heads, d_ff {m['d_ff']}, "
        f"{m['activation']}, {'pre' if m['norm_first'] else 'post'}-norm, "
        f"{m['position']} positions, dropout {m['dropout']}; {data['parameters'] / 1e6:.2f} M "
        f"parameters. Sized by a timed calibration: {cal['steps_per_s']:.2f} training steps/s "
        f"at batch {s['batch_size']} ({cal['timed_steps']} steps over {s['calibrate_s']:g} s), "
        f"validation pass {cal['eval_s']:.1f} s, checkpoint write {cal['save_s']:.2f} s.",
        f"Training: `Trainer`, AdamW (lr {s['lr']:g}, betas 0.9/0.98, weight decay "
        f"{s['weight_decay']:g}), {tr['train_config']['warmup_steps']} warmup steps then "
        f"cosine decay over the {tr['planned_steps']} steps planned for the "
        f"{s['budget_min']:g}-minute budget, label smoothing {s['label_smoothing']:g}, "
        f"gradient clipping 1.0, batch {s['batch_size']} pairs (length-bucketed), fp32, "
        f"{s['threads']} threads. Validation every epoch ({tr['eval_every']} steps); "
        f"the weights of the best validation loss are used below.",
        hx.markdown_table(["", "value"], [
            ["steps done / planned", f"{tr['steps']} / {tr['planned_steps']}"],
            ["epochs", f"{tr['epochs']:.1f}"],
            ["training wall time", f"{tr['wall_s'] / 60:.1f} min "
             f"({tr['steps_per_s']:.2f} steps/s, validation and checkpoints included)"],
            ["ended by", tr["stopped_by"]],
            ["best validation loss", f"{tr['best_valid_loss']:.3f} nats/token (perplexity "
             f"{tr['best_valid_ppl']:.2f}) at step {tr['best_step']}, epoch "
             f"{tr['best_epoch']:.1f}"]], "ll"),
        *hx.image_links([("translate: training and validation loss", png)], md_dir),
        f"### Test BLEU and chrF ({test['pairs']} pairs, {test['sources']} distinct English "
        f"sentences)",
        f"Each distinct English sentence is translated once (batches of "
        f"{s['decode_batch']} sentences of similar length, KV cache, at most "
        f"min({s['max_len']}, 1.5 x the longest source + 10) tokens). **BLEU**: one line "
        f"per test pair against its reference (sacrebleu, `tokenize=\"zh\"`); "
        f"**multi-ref BLEU**: one line per English sentence against all of its references "
        f"(up to {test['max_refs']}); **chrF**: per pair. Speed: sentences per second of "
        f"the whole decoding (tokenizing, `generate`, detokenizing), {s['threads']} threads.",
        hx.markdown_table(
            ["decoding", "BLEU", "multi-ref BLEU", "chrF", "sentences/s", "seconds"],
            [["greedy" if r["num_beams"] == 1 else f"beam {r['num_beams']}, length penalty "
              f"{s['length_penalty']:g}", f"{r['bleu']:.1f}", f"{r['bleu_multi_ref']:.1f}",
              f"{r['chrf']:.1f}", hx.fmt(r["sentences_per_s"]), f"{r['seconds']:.1f}"]
             for r in (test["greedy"], test["beam"])]),
        f"Signatures: `{test['beam']['bleu_signature']}`, `{test['beam']['chrf_signature']}`. "
        f"Beam BLEU detail: `{test['beam']['bleu_detail']}`.",
        "### Example translations (test split)",
        "Evenly spaced through the test split (the file runs from short to long sentences); "
        "each with its Tatoeba attribution, as the licence asks.",
        hx.markdown_table(
            ["English", "reference", f"beam {test['beam']['num_beams']}", "greedy",
             "attribution"],
            [[_cell(e["source"]), _cell(e["reference"]), _cell(e["beam"]),
              _cell(e["greedy"]), _cell(e["attribution"])] for e in data["examples"]],
            "lllll"),
    ]
    return "\n\n".join(parts)


def render(data: dict[str, Any], out: Path, md: Path | None, json_path: Path | None) -> None:
    """Draw the plot beside the results and publish the JSON and the section."""
    png = out / PNG
    m, tr = data["model"], data["train"]
    plot(png, tr["history"], tr["best_step"], data["meta"]["settings"]["label_smoothing"],
         f"EncoderDecoder {m['num_layers']}+{m['num_decoder_layers']}, d_model {m['d_model']}: "
         f"English -> Chinese")
    hx.publish(json_path, data, md, KEY, lambda md_dir: section(data, png, md_dir))
