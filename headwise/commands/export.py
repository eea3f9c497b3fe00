"""``headwise export``: a classifier as ONNX (and int8), checked against PyTorch."""

from __future__ import annotations

import argparse
import json

from headwise.commands._common import (
    add_data_options,
    check_out_file,
    read,
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
        "and int8 on a labelled file is measured. Transformer classifiers only: a BiLSTM, a "
        "compound (multi-label + slots) classifier, a TF-IDF model or an ensemble has no "
        "ONNX export, and `headwise serve` serves it as it is.")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train`")
    p.add_argument("--onnx", required=True, metavar="FILE", help="the .onnx file to write")
    p.add_argument("--int8", metavar="FILE", help="also write a dynamically quantised copy")
    p.add_argument("--data", metavar="FILE",
                   help="labelled data to measure the accuracy change on")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset (default 18)")
    p.add_argument("--portable", action="store_true",
                   help="standard ONNX operators only (any runtime), without onnxruntime's "
                        "fused operators (slower on onnxruntime)")
    add_data_options(p)
    p.set_defaults(func=run)


def _refuse_other_kinds(model: str) -> None:
    """Refuse, in words, a directory whose kind has no ONNX export (a TF-IDF model, an
    ensemble, a compound classifier: :mod:`headwise.intent.kinds` says why)."""
    from headwise.intent.kinds import kind_of

    kind_of(model).require("onnx", model)


def run(args: argparse.Namespace) -> int:
    from headwise.intent.classifier import IntentClassifier
    from headwise.intent.inference.load import export_checked_onnx
    from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
    from headwise.onnx.export import accuracy, max_logit_difference, probe_batches, quantize_int8
    from headwise.onnx.fusion import fused_op_counts, unfusable_reason

    check_out_file(args.onnx, "--onnx")
    if args.int8:
        check_out_file(args.int8, "--int8")
    _refuse_other_kinds(args.model)
    clf = IntentClassifier.load(args.model)
    # the export and its check against PyTorch: what runtime auto builds into its cache
    onnx_rt, diff = export_checked_onnx(clf, args.onnx, model_dir=args.model,
                                        opset=args.opset, fuse=not args.portable)
    out = onnx_rt.path
    tok = clf.tokenizer
    torch_rt = TorchRuntime(clf.model)
    fused = fused_op_counts(out)
    report: dict = {"onnx": str(out), "max_abs_logit_diff": diff, "fused_ops": fused}
    ops = ", ".join(f"{n} {op}" for op, n in fused.items()) or "none (standard operators)"
    print(f"wrote {out}: logits within {diff:.2e} of PyTorch; fused operators: {ops}")
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
        qdiff = max_logit_difference(torch_rt, runtimes["int8"], probes)
        report.update(int8=str(q), int8_max_abs_logit_diff=qdiff)
        print(f"wrote {q}: int8 logits within {qdiff:.2e} of PyTorch")
    if args.data:
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
