"""``headwise export``: a classifier as ONNX (and int8), checked against PyTorch; a compound
(multi-label + slots) classifier's graph also carries its slot-tag logits."""

from __future__ import annotations

import argparse
import json
from typing import Any

from headwise.commands._common import (
    add_data_options,
    check_out_file,
    read,
    read_compound,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="export a classifier to ONNX",
        description="Write the classifier as an ONNX graph (dynamic batch and length) for "
        "`headwise serve` (which uses MODEL/model.onnx by default), check its logits "
        "against PyTorch (at most 1e-4 apart), and optionally a dynamically quantised int8 "
        "copy. The graph uses onnxruntime's fused operators (one Attention node per layer "
        "where the attention is plain multi-head self-attention, not with rotary positions, "
        "grouped-query or number-aware heads, as the output then says; "
        "SkipLayerNormalization, BiasGelu: the same float32 function, faster); --portable "
        "writes standard ONNX operators only. With --data, the accuracy of PyTorch, ONNX "
        "and int8 on a labelled file is measured. A compound (multi-label + slots) "
        "classifier's graph also returns its slot-tag logits, checked as its intent logits "
        "are, and its decisions (intent sets, BIO tags) against PyTorch's; its --data is "
        "annotated examples (intents and slot spans): the intent sets' exact match of each "
        "runtime and how often ONNX and int8 answer PyTorch's intents and slot spans. "
        "Transformer networks only: a BiLSTM, a TF-IDF model or an ensemble has no ONNX "
        "export, and `headwise serve` serves it as it is.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train`")
    p.add_argument("--onnx", required=True, metavar="FILE", help="the .onnx file to write")
    p.add_argument("--int8", metavar="FILE",
                   help="also write a dynamically quantised copy (int8 activations, 7-bit "
                        "weights with one scale per output channel: right on CPUs with and "
                        "without VNNI)")
    p.add_argument("--data", metavar="FILE",
                   help="labelled data to measure the accuracy change on (annotated "
                        "examples for a compound classifier)")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset (default 18)")
    p.add_argument("--portable", action="store_true",
                   help="standard ONNX operators only (any runtime), without onnxruntime's "
                        "fused operators (slower on onnxruntime)")
    add_data_options(p)
    p.set_defaults(func=run)


def _compound_data_report(clf: Any, runtimes: dict[str, Any], args: argparse.Namespace
                          ) -> dict[str, Any]:
    """A compound classifier's answers to annotated examples on each runtime: the share of
    texts whose intent set is the annotated one, and, for each runtime but PyTorch, the
    share whose intent set and whose slot spans (name, start, end) are PyTorch's."""
    from headwise.intent.inference.compound import CompoundPredictor

    data = read_compound(args.data, args)
    if not data.examples:
        raise ValueError(f"{args.data} has no annotated example")
    texts = data.texts
    gold = [set(e.intents) for e in data.examples]
    sets, spans = {}, {}
    for name, rt in runtimes.items():
        found, _ = CompoundPredictor(clf, rt).predictions(texts)
        sets[name] = [{k for k, _ in p.intents} for p in found]
        spans[name] = [[(s.name, s.start, s.end) for s in p.slots] for p in found]
    n = len(texts)
    out: dict[str, Any] = {"examples": n, "intent_exact_match": {
        name: sum(a == g for a, g in zip(got, gold, strict=True)) / n
        for name, got in sets.items()}}
    for name in runtimes:
        if name != "torch":
            out[f"{name}_vs_torch"] = {
                "intent_sets_equal": sum(a == b for a, b in zip(
                    sets[name], sets["torch"], strict=True)) / n,
                "slot_spans_equal": sum(a == b for a, b in zip(
                    spans[name], spans["torch"], strict=True)) / n}
    line = ", ".join(f"{k} {v:.4f}" for k, v in out["intent_exact_match"].items())
    print(f"intent-set exact match on {n} annotated examples: {line}")
    for name in runtimes:
        if name != "torch":
            agree = out[f"{name}_vs_torch"]
            print(f"{name} answers PyTorch's intent set on {agree['intent_sets_equal']:.4f} "
                  f"and its slot spans on {agree['slot_spans_equal']:.4f} of the texts")
    return out


def run(args: argparse.Namespace) -> int:
    from headwise.intent.inference.load import compare_joint, export_checked_onnx
    from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
    from headwise.intent.kinds import kind_of
    from headwise.onnx.export import accuracy, max_logit_difference, probe_batches, quantize_int8
    from headwise.onnx.fusion import fused_op_counts, unfusable_reason

    check_out_file(args.onnx, "--onnx")
    if args.int8:
        check_out_file(args.int8, "--int8")
    # a kind without an export (a TF-IDF model, an ensemble) is refused with the registry's
    # reason; a network the exporter cannot trace (a BiLSTM), by export_checked_onnx
    kind = kind_of(args.model)
    kind.require("onnx", args.model)
    clf = kind.load(args.model)
    compound = kind.multi_label
    # the export and its check against PyTorch: what runtime auto builds into its cache
    onnx_rt, diff = export_checked_onnx(clf, args.onnx, model_dir=args.model,
                                        opset=args.opset, fuse=not args.portable)
    out = onnx_rt.path
    tok = clf.tokenizer
    torch_rt = TorchRuntime(clf.model)
    fused = fused_op_counts(out)
    report: dict = {"onnx": str(out), "max_abs_logit_diff": diff, "fused_ops": fused}
    ops = ", ".join(f"{n} {op}" for op, n in fused.items()) or "none (standard operators)"
    what = "intent and slot-tag logits" if compound else "logits"
    print(f"wrote {out}: {what} within {diff:.2e} of PyTorch; fused operators: {ops}")
    unfused = None if args.portable or fused.get("Attention") else \
        unfusable_reason(clf.model) or "onnxruntime's optimizer did not match the layers"
    if unfused:
        report["attention_not_fused"] = unfused
        print(f"no fused Attention node: {unfused}; onnxruntime's fused operator takes plain "
              f"multi-head self-attention with a padding mask only, so each layer's attention "
              f"runs as standard operators (same outputs, slower)")
    runtimes = {"torch": torch_rt, "onnx": onnx_rt}
    if args.int8:
        q = quantize_int8(out, args.int8)
        runtimes["int8"] = OnnxRuntime(q)
        probes = probe_batches(tok.vocab_size, clf.max_length, pad_id=tok.pad_token_id)
        if compound:
            found = compare_joint(clf, torch_rt, runtimes["int8"], probes)
            report.update(int8=str(q), int8_max_abs_logit_diff=found["max_abs_logit_diff"],
                          int8_max_abs_tag_logit_diff=found["max_abs_tag_logit_diff"],
                          int8_probe_intent_sets_equal=found["intent_sets_equal"],
                          int8_probe_tags_equal=found["tags_equal"])
            print(f"wrote {q}: int8 intent logits within {found['max_abs_logit_diff']:.2e} "
                  f"and tag logits within {found['max_abs_tag_logit_diff']:.2e} of PyTorch; "
                  f"on random probe batches, {found['intent_sets_equal']:.4f} of the intent "
                  f"sets and {found['tags_equal']:.4f} of the BIO tags agree")
        else:
            qdiff = max_logit_difference(torch_rt, runtimes["int8"], probes)
            report.update(int8=str(q), int8_max_abs_logit_diff=qdiff)
            print(f"wrote {q}: int8 logits within {qdiff:.2e} of PyTorch")
    if args.data and compound:
        report["compound"] = _compound_data_report(clf, runtimes, args)
    elif args.data:
        data = read(args.data, args, require_labels=True)
        index = {name: i for i, name in enumerate(clf.labels)}
        known = [(t, index[y]) for t, y in zip(data.texts, data.labels, strict=True)
                 if y in index]
        if not known:
            raise ValueError(f"{args.data} has no example of the model's intents")
        texts, labels = [t for t, _ in known], [y for _, y in known]
        acc = {name: accuracy(rt, tok, texts, labels, max_length=clf.max_length)
               for name, rt in runtimes.items()}
        report["accuracy"] = {**acc, "examples": len(texts)}
        line = ", ".join(f"{k} {v:.4f}" for k, v in acc.items())
        print(f"accuracy on {len(texts)} examples of known intents: {line}")
        if "int8" in acc:
            print(f"int8 accuracy change: {acc['int8'] - acc['torch']:+.4f}")
    report_path = out.with_suffix(".export.json")
    report_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0
