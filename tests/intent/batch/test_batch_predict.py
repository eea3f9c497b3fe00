"""Streaming batch prediction (``headwise predict MODEL --data FILE --out FILE``): the
records of ``predict --json``, every input layout, bad rows as the readers report them,
atomic output, resume after an interruption (and after ``kill -9``), constant memory."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_corpus import INTENTS

from headwise.cli import main
from headwise.intent import batch as bp
from headwise.intent.batch import (
    BatchInvariantRuntime,
    OutputFile,
    RowReader,
    partial_path,
    predict_file,
    state_path,
)
from headwise.intent.batch.invariance import MIN_ROWS
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.inference.bucketing import length_bucket
from headwise.models import EncoderClassifier, ModelConfig
from headwise.models.joint import JointIntentSlotModel
from headwise.serve.config import ServeConfig
from headwise.serve.startup import load_served_predictor
from headwise.text.readers import DataError, read_examples
from headwise.text.tokenizer import Tokenizer

TEXTS = [t for ts in INTENTS.values() for t in ts]
#: queries of 1 to 14 words, some over the model's 12 tokens (a long_text note)
WORDS = " ".join(TEXTS).split()
#: what the subprocess of the kill test runs: the CLI with each chunk slowed down
SLOW_CLI = ("import sys, time\n"
            "import headwise.intent.batch.run as bp\n"
            "real = bp.format_records\n"
            "def slow(*a, **k):\n"
            "    time.sleep(0.05)\n"
            "    return real(*a, **k)\n"
            "bp.format_records = slow\n"
            "from headwise.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")



def padded(batch: list[list[int]], pad_id: int, width: int | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Token rows right-padded to ``width`` (default: the longest) and their 0/1 mask."""
    width = width or max(map(len, batch))
    ids = np.full((len(batch), width), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(batch):
        ids[i, :len(r)], mask[i, :len(r)] = r, 1
    return ids, mask

def queries(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 15)))) for _ in range(n)]


def _tokenizer() -> Tokenizer:
    return Tokenizer.train_wordpiece(TEXTS * 3, 120, min_frequency=1)


def _config(tok: Tokenizer, **extra) -> ModelConfig:
    return ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=2, num_heads=4,
                       d_ff=64, max_position=64, pad_token_id=tok.pad_token_id, dropout=0.0,
                       **extra)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tok = _tokenizer()
    torch.manual_seed(0)
    model = EncoderClassifier(_config(tok, num_labels=3, labels=list(INTENTS))).eval()
    with torch.no_grad():  # a larger head: probabilities away from 1/3
        model.classifier.weight.normal_(0, 1.0)
    clf = IntentClassifier(model, tok, list(INTENTS), temperature=1.5, threshold=0.4,
                           max_length=12)
    return clf.save(tmp_path_factory.mktemp("bp") / "model")


@pytest.fixture(scope="module")
def predictor(model_dir):
    return load_served_predictor(ServeConfig(model_dir=str(model_dir), warmup=False), report=None)


def _write_text(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path


def _cli_json(model_dir, texts, capsys, *extra) -> list[dict]:
    assert main(["predict", str(model_dir), "--json", *extra, "--", *texts]) == 0
    return [json.loads(x) for x in capsys.readouterr().out.splitlines()]


def _same_records(got: list[dict], want: list[dict], tol: float = 2e-6) -> None:
    """Equal records, the probabilities within ``tol`` (``predict --json`` batches texts
    its own way, whose rounding differs in the 7th digit)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w)
        for key in g:
            if key == "decision" and g[key] is not None:
                assert g[key]["score"] == w[key]["score"]
                assert [g[key]["value"], g[key]["threshold"]] == pytest.approx(
                    [w[key]["value"], w[key]["threshold"]], abs=tol)
            elif key in ("top_k", "intents"):
                assert [s["intent"] for s in g[key]] == [s["intent"] for s in w[key]]
                assert [s["confidence"] for s in g[key]] == pytest.approx(
                    [s["confidence"] for s in w[key]], abs=tol)
            else:
                assert g[key] == w[key], key


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


# -- the records --------------------------------------------------------------------------
def test_records_are_those_of_predict_json_plus_the_line(model_dir, tmp_path, capsys):
    texts = queries(40) + ["x" * 300]  # one over ECHO_CHARS: echoed and cut
    data = tmp_path / "chats.csv"
    with data.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "message", "agent"])
        w.writerows([i, t, "bot"] for i, t in enumerate(texts))
    out = tmp_path / "labels.jsonl"
    assert main(["predict", str(model_dir), "--data", str(data), "--out", str(out),
                 "--columns", "message", "--top-k", "2", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"wrote {len(texts)} answers to {out}" in err and "runtime onnx" in err
    got = _jsonl(out)
    assert [r.pop("line") for r in got] == list(range(2, len(texts) + 2))
    want = _cli_json(model_dir, texts, capsys, "--top-k", "2")
    _same_records(got, want)
    assert got[-1]["text"] == "x" * bp.ECHO_CHARS + "…" and got[-1]["text_chars"] == 300
    assert any(r["long_text"] is not None for r in got)  # the notes are there too
    assert not partial_path(out).exists() and not state_path(out).exists()


def test_csv_output_holds_the_same_records(model_dir, predictor, tmp_path):
    data = _write_text(tmp_path / "q.txt", queries(30))
    predict_file(predictor, data, tmp_path / "a.jsonl", progress=False)
    predict_file(predictor, data, tmp_path / "a.csv", progress=False)
    with (tmp_path / "a.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(bp.CSV_COLUMNS)
    for row, rec in zip(rows, _jsonl(tmp_path / "a.jsonl"), strict=True):
        assert int(row["line"]) == rec["line"] and row["text"] == rec["text"]
        assert int(row["text_chars"]) == rec["text_chars"]
        assert json.loads(row["intents"]) == rec["intents"]
        assert row["out_of_scope"] == str(rec["out_of_scope"]).lower()
        assert json.loads(row["top_k"]) == rec["top_k"]
        assert json.loads(row["decision"]) == rec["decision"]
        assert json.loads(row["slots"]) == rec["slots"] == []
        assert (json.loads(row["long_text"]) if row["long_text"] else None) == rec["long_text"]


def test_answers_do_not_depend_on_the_chunk_size(predictor, tmp_path):
    """A text's answer is the same whether it was batched alone or with others: the
    records of every chunking are byte-identical (PyTorch's one-row kernel rounds
    differently, and so does MKL for up to 15 rows on AVX-512 CPUs; the guard runs every
    pass with at least MIN_ROWS rows)."""
    data = _write_text(tmp_path / "q.txt", queries(80, seed=1))
    texts = {}
    for size in (1, 7, 1000):
        out = tmp_path / f"c{size}.jsonl"
        predict_file(predictor, data, out, chunk_size=size, progress=False)
        texts[size] = out.read_bytes()
    assert texts[1] == texts[7] == texts[1000]


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_batch_invariant_runtime_answers_a_row_alike_in_any_batch(model_dir, runtime):
    """Alone, with longer or shorter neighbours, padded to any width of its bucket: the
    same bits (the predictors pad a pass to its longest row; the runtime re-pads), on
    PyTorch and on onnxruntime (what runtime auto takes for this model)."""
    predictor = load_served_predictor(ServeConfig(model_dir=str(model_dir), warmup=False,
                                                  runtime=runtime), report=None)
    inner = predictor.runtime
    rt = BatchInvariantRuntime(inner, pad_id=predictor.pad_id, max_length=predictor.max_length)
    assert rt.name == runtime and rt.inner is inner
    rows = [list(it.chunks[0]) for it in predictor.encode_truncated(queries(40, seed=2))]

    def run(batch: list[list[int]], width: int | None = None):
        ids, mask = padded(batch, predictor.pad_id, width)
        width = ids.shape[1]
        logits, pooled = rt.forward(ids, mask)
        assert logits.shape == (len(batch), 3) and len(pooled) == len(batch)
        return logits

    for target in rows[:8]:
        bucket = [r for r in rows if length_bucket(len(r)) == length_bucket(len(target))]
        alone = run([target])[0]
        # every small batch size (MKL's small-matrix path covers up to 15 rows on AVX-512)
        for n in range(2, MIN_ROWS + 2):
            assert np.array_equal(run([target, *(bucket * n)[:n - 1]])[0], alone), n
        assert np.array_equal(run([target, *bucket])[0], alone)
        assert np.array_equal(run([*bucket[:3], target])[3], alone)
        assert np.array_equal(run([target], width=min(length_bucket(len(target)),
                                                       predictor.max_length))[0], alone)


@pytest.fixture(scope="module")
def compound_dir(tmp_path_factory):
    """A tiny random compound classifier (a 2-layer joint Transformer, its attention
    exported fused) with large heads: intents and tags away from their thresholds' ties."""
    tok = _tokenizer()
    torch.manual_seed(3)
    tags = ["O", "B-amount_of_money", "I-amount_of_money"]
    model = JointIntentSlotModel(_config(tok, model_type="joint_intent_slot", multi_label=True,
                                         slot_tags=tags, num_labels=3,
                                         labels=list(INTENTS))).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
        model.tagger.weight.normal_(0, 1.0)
    return CompoundClassifier(model, tok, list(INTENTS), max_length=12).save(
        tmp_path_factory.mktemp("bp") / "cmp")


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_batch_invariant_runtime_answers_a_compound_row_alike_in_any_batch(compound_dir,
                                                                           runtime):
    """A compound model's intent and slot-tag logits of a row are the same bits alone or
    batched, on PyTorch and on onnxruntime, as a single-label model's
    (:func:`test_batch_invariant_runtime_answers_a_row_alike_in_any_batch`)."""
    predictor = load_served_predictor(ServeConfig(model_dir=str(compound_dir), warmup=False,
                                                  runtime=runtime), report=None)
    inner = predictor.runtime
    rt = BatchInvariantRuntime(inner, pad_id=predictor.pad_id, max_length=predictor.max_length)
    assert rt.name == runtime and (runtime == "torch" or inner.tagged)
    rows = [list(it.chunks[0]) for it in predictor.encode(queries(40, seed=6))]

    def run(batch: list[list[int]], width: int | None = None):
        ids, mask = padded(batch, predictor.pad_id, width)
        width = ids.shape[1]
        logits, tags = rt.forward_joint(ids, mask)
        assert logits.shape == (len(batch), 3) and tags.shape == (len(batch), width, 3)
        return logits, tags

    def same(got, row: int, alone, n: int) -> None:
        assert np.array_equal(got[0][row], alone[0][0]), n
        assert np.array_equal(got[1][row, :n], alone[1][0, :n]), n

    by_bucket: dict[int, list[list[int]]] = {}
    for r in rows:  # two rows of each length bucket
        by_bucket.setdefault(length_bucket(len(r)), []).append(r)
    for target in [r for found in by_bucket.values() for r in found[:2]]:
        n = len(target)
        bucket = [r for r in rows if length_bucket(len(r)) == length_bucket(n)]
        alone = run([target])
        for k in range(2, MIN_ROWS + 2):
            same(run([target, *(bucket * k)[:k - 1]]), 0, alone, n)
        same(run([target, *bucket]), 0, alone, n)
        same(run([*bucket[:3], target]), 3, alone, n)
        same(run([target], width=min(length_bucket(n), predictor.max_length)), 0, alone, n)


def test_compound_records_do_not_depend_on_the_chunk_size_on_onnx(compound_dir, tmp_path):
    """The file stream's guarantee for a compound model on onnxruntime (its export, with
    the slot tags): the records of every chunking are byte-identical."""
    predictor = load_served_predictor(ServeConfig(model_dir=str(compound_dir), warmup=False,
                                                  runtime="onnx"), report=None)
    assert predictor.runtime.name == "onnx"
    data = _write_text(tmp_path / "q.txt", queries(60, seed=7) + ["send 50 pounds to john"])
    texts = {}
    for size in (1, 7, 1000):
        out = tmp_path / f"c{size}.jsonl"
        predict_file(predictor, data, out, chunk_size=size, progress=False)
        texts[size] = out.read_bytes()
    assert texts[1] == texts[7] == texts[1000]
    assert any(json.loads(line)["slots"] for line in texts[1].splitlines())


def test_compound_records_are_those_of_predict_json(compound_dir, tmp_path, capsys):
    d = compound_dir
    texts = queries(20, seed=4) + ["send 50 pounds to john"]
    data = _write_text(tmp_path / "q.txt", texts)
    out = tmp_path / "c.jsonl"
    assert main(["predict", str(d), "--data", str(data), "--out", str(out), "--quiet"]) == 0
    got = _jsonl(out)
    assert [r.pop("line") for r in got] == list(range(1, len(texts) + 1))
    _same_records(got, _cli_json(d, texts, capsys))
    assert list(got[0]) == list(bp.JSONL_KEYS[1:])
    predict_file(load_served_predictor(ServeConfig(model_dir=str(d), warmup=False), report=None),
                 data, tmp_path / "c.csv", progress=False)
    with (tmp_path / "c.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [json.loads(r["slots"]) for r in rows] == [r["slots"] for r in _jsonl(out)]


def test_a_tfidf_model_streams_its_own_answers(tmp_path, capsys):
    from headwise.intent.tfidf import TfidfClassifier

    labels = [k for k, ts in INTENTS.items() for _ in ts]
    d = TfidfClassifier.fit(TEXTS, labels).save(tmp_path / "tfidf")
    texts = queries(25, seed=11)
    data = _write_text(tmp_path / "q.txt", texts)
    out = tmp_path / "t.jsonl"
    assert main(["predict", str(d), "--data", str(data), "--out", str(out), "--quiet"]) == 0
    assert "runtime tfidf" in capsys.readouterr().err
    got = _jsonl(out)
    assert [r.pop("line") for r in got] == list(range(1, 26))
    _same_records(got, _cli_json(d, texts, capsys))


def test_an_onnx_export_beside_the_model_runs_on_onnxruntime(model_dir, tmp_path, capsys):
    import shutil

    from headwise._files import file_sha256
    from headwise.models.io import WEIGHTS_NAME
    from headwise.onnx.export import export_onnx

    d = tmp_path / "exported"
    shutil.copytree(model_dir, d)
    export_onnx(IntentClassifier.load(d).model, d / "model.onnx", max_length=12,
                weights_sha256=file_sha256(d / WEIGHTS_NAME))
    data = _write_text(tmp_path / "q.txt", queries(25, seed=5))
    assert main(["predict", str(d), "--data", str(data), "--out", str(tmp_path / "o.jsonl"),
                 "--quiet"]) == 0
    assert "runtime onnx" in capsys.readouterr().err
    assert main(["predict", str(d), "--data", str(data), "--out", str(tmp_path / "t.jsonl"),
                 "--quiet", "--runtime", "torch"]) == 0
    _same_records(_jsonl(tmp_path / "o.jsonl"), _jsonl(tmp_path / "t.jsonl"), tol=1e-4)


# -- input layouts and bad rows -----------------------------------------------------------
def test_every_layout_reads_the_same_texts_at_their_lines(predictor, tmp_path):
    texts = ["i lost my card", 'send "50" pounds, now', "what is my balance"]
    (tmp_path / "a.csv").write_bytes(  # a byte-order mark, CRLF, a quoted two-line text
        b"\xef\xbb\xbfText,label\r\n" + "".join(f'"{t.replace(chr(34), 2 * chr(34))}",x\r\n'
                                                for t in texts[:2]).encode()
        + b'"what is\nmy balance",x\r\n')
    (tmp_path / "a.tsv").write_text("id\tquery\n1\ti lost my card\n\n2\tsend \"50\" pounds, "
                                    "now\n3\twhat is my balance\n", encoding="utf-8")
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"utterance": t}) + "\n\n"
                                              for t in texts), encoding="utf-8")
    (tmp_path / "a.log").write_text("  i lost my card \n\nsend \"50\" pounds, now\r\nwhat is "
                                    "my balance", encoding="utf-8")
    lines = {"a.csv": [2, 3, 4], "a.tsv": [2, 4, 5], "a.jsonl": [1, 3, 5], "a.log": [1, 3, 4]}
    answers = {}
    for name, want in lines.items():
        rows = list(RowReader(tmp_path / name))
        assert [r.line for r in rows] == want, name
        got = [r.text for r in rows]
        assert got == (texts if name != "a.csv" else texts[:2] + ["what is\nmy balance"])
        out = tmp_path / f"{name}.jsonl"
        predict_file(predictor, tmp_path / name, out, progress=False)
        answers[name] = [r.pop("line") and r for r in _jsonl(out)]
    assert answers["a.tsv"] == answers["a.jsonl"] == answers["a.log"]
    # the readers agree on the rows and their lines
    for name in ("a.csv", "a.tsv", "a.jsonl"):
        ds = read_examples(tmp_path / name, require_labels=False)
        assert [(e.line, e.text) for e in ds] == [(r.line, r.text)
                                                  for r in RowReader(tmp_path / name)]
    assert RowReader(tmp_path / "a.log", input_format="csv").format == "csv"
    with pytest.raises(ValueError, match="--columns t names a CSV column"):
        RowReader(tmp_path / "a.log", text_column="t")


BAD_CSV = (b"text,label\nfine one,a\n,a\n\"two\nlines\",a,extra\nbad \xff byte,a\n"
           b"another fine,a\n   ,a\nlast,a\n")
BAD_JSONL = (b'{"text": "fine one"}\n{"text": ""}\n{"text": 5}\n{"txt": "x"}\n[1]\n'
             b'{"text": "bad \xff"}\n{"text": unquoted}\n{"text": "another fine"}\n')


@pytest.mark.parametrize("name, data", [("bad.csv", BAD_CSV), ("bad.jsonl", BAD_JSONL)])
def test_bad_rows_are_those_the_readers_report(predictor, tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    ref = read_examples(path, require_labels=False, skip_bad_rows=True)
    seen: list[DataError] = []
    result = predict_file(predictor, path, tmp_path / "o.jsonl", progress=False,
                          on_bad_row=seen.append)
    assert result.bad_rows == ref.skipped and result.skipped == len(ref.skipped) >= 4
    assert [str(e) for e in seen] == [f"{path}:{line}: {why}" for line, why in ref.skipped]
    assert [(r["line"], r["text"]) for r in _jsonl(tmp_path / "o.jsonl")] == \
        [(e.line, e.text) for e in ref]
    line, why = ref.skipped[0]
    with pytest.raises(DataError, match=f"^{re.escape(f'{path}:{line}: {why}')}$"):
        predict_file(predictor, path, tmp_path / "s.jsonl", progress=False, strict=True)
    assert not (tmp_path / "s.jsonl").exists() and partial_path(tmp_path / "s.jsonl").exists()


def test_plain_text_bad_bytes_and_whole_file_problems(predictor, tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_bytes(b"fine\nnot \xc3\x28 utf8\n\nfine again\n")
    result = predict_file(predictor, path, tmp_path / "o.jsonl", progress=False)
    assert result.bad_rows == [(2, "not UTF-8 (byte 0xc3 at column 5)")]
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("message,label\nhi,a\n", encoding="utf-8")
    out = tmp_path / "x.jsonl"
    with pytest.raises(DataError, match=r"nocol.csv:1: no text column one of text.*"
                                        r"--columns"):
        predict_file(predictor, nocol, out, progress=False)
    assert not out.exists() and not partial_path(out).exists()  # nothing was started
    array = tmp_path / "arr.json"
    array.write_text('[{"text": "hi"}]', encoding="utf-8")
    with pytest.raises(DataError, match="arr.json:1: a JSON array cannot be read"):
        predict_file(predictor, array, out, progress=False)
    # the CLI: one line, exit 1
    assert main(["predict", "M", "--data", str(nocol), "--out", str(tmp_path / "y.txt")]) == 1
    assert "cannot tell the output format" in capsys.readouterr().err


def test_command_line_refusals_name_the_option(model_dir, tmp_path, capsys):
    data = _write_text(tmp_path / "q.jsonl", ['{"text": "hi"}'])
    m = str(model_dir)
    cases = [
        (["--data", str(data)], "--data needs --out"),
        (["--out", str(tmp_path / "o.jsonl"), "hi"], "--out: for --data FILE"),
        (["--resume", "--strict", "hi"], "--resume, --strict: for --data FILE"),
        (["--data", str(data), "--out", str(tmp_path / "o.jsonl"), "hi"], "not both"),
        (["--data", str(data), "--out", str(tmp_path / "o.jsonl"), "--json"], "--json prints"),
        (["--data", str(tmp_path), "--out", str(tmp_path / "o.jsonl")], "is a directory"),
        (["--data", str(data), "--out", str(tmp_path / "o.jsonl"), "--batch-size", "0"],
         "--batch-size must be at least 1"),
        (["--data", str(data), "--out", str(tmp_path / "d"), "--ray", "--columns", ",id"],
         "--columns ...,KEEP is for one file"),
        (["--data", str(data), "--out", str(tmp_path / "d"), "--ray", "--resume"],
         "--resume is for one file"),
        (["--data", str(data), "--out", str(data)], "is the input file"),
        (["--data", str(data), "--out", str(tmp_path / "o.jsonl"), "--threshold", "2"],
         "threshold must be in [0, 1]"),
    ]
    for extra, message in cases:
        assert main(["predict", m, *extra]) == 1, extra
        err = capsys.readouterr().err
        # one line (after the runtime's, for a run that got as far as loading the model)
        assert message in err.splitlines()[-1], (extra, err)
        assert err.count("\n") == 1 or "runtime auto" in err.splitlines()[0], (extra, err)


def test_without_ray_the_ray_option_says_what_to_install(model_dir, tmp_path, capsys,
                                                         monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    data = _write_text(tmp_path / "q.txt", ["hi"])
    assert main(["predict", str(model_dir), "--data", str(data), "--out",
                 str(tmp_path / "d"), "--ray"]) == 1
    assert "pip install headwise[ray]" in capsys.readouterr().err


@pytest.mark.parametrize("argv, want", [
    ([], {"format": ("auto", "auto"), "columns": (None, ()), "runtime": ("auto", None),
          "ray": None}),
    (["--format", "text"], {"format": ("text", "auto")}),
    (["--format", ",csv"], {"format": ("auto", "csv")}),
    (["--format", "xlsx,jsonl"], {"format": ("xlsx", "jsonl")}),
    (["--columns", "message"], {"columns": ("message", ())}),
    (["--columns", ",id,agent"], {"columns": (None, ("id", "agent"))}),
    (["--columns", "q,id"], {"columns": ("q", ("id",))}),
    (["--runtime", "torch"], {"runtime": ("torch", None)}),
    (["--runtime", "m/fast.onnx"], {"runtime": ("onnx", "m/fast.onnx")}),
    (["--runtime", "auto:m/fast.onnx"], {"runtime": ("auto", "m/fast.onnx")}),
    (["--ray"], {"ray": {"address": None, "actors": None, "cpus": None}}),
    (["--ray", "actors=4,cpus=8"], {"ray": {"address": None, "actors": 4, "cpus": 8}}),
    (["--ray", "ray://head:10001,actors=2"],
     {"ray": {"address": "ray://head:10001", "actors": 2, "cpus": None}}),
])
def test_file_option_values_are_read_into_their_parts(argv, want):
    from headwise.cli import build_parser

    args = build_parser(["predict"]).parse_args(["predict", "M", *argv])
    assert {k: getattr(args, k) for k in want} == want


@pytest.mark.parametrize("argv, message", [
    (["--format", "csv,text"], "OUT must be one of auto, jsonl, csv"),
    (["--format", "a,b,c"], "give IN[,OUT]"),
    (["--columns", "text,,id"], "an empty column name"),
    (["--runtime", "fast"], "an ONNX file (FILE.onnx) or auto:FILE.onnx"),
    (["--ray", "actors=0"], "actors must be at least 1"),
    (["--ray", "replicas=2"], "give ADDRESS, actors=N or cpus=N"),
    (["--ray", "auto,cpus=4"], "cpus=N sizes the local cluster"),
])
def test_bad_file_option_values_are_usage_errors(argv, message, capsys):
    from headwise.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser(["predict"]).parse_args(["predict", "M", *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_repeated_constants_stay_equal():
    from headwise.commands import _common, predict
    from headwise.intent.inference import RUNTIMES

    assert predict.ECHO_CHARS == bp.ECHO_CHARS
    assert predict.INPUT_FORMATS == bp.INPUT_FORMATS
    assert predict.OUTPUT_FORMATS == bp.OUTPUT_FORMATS and _common.RUNTIMES == RUNTIMES
    assert (predict.DEFAULT_BATCH_SIZE, predict.DEFAULT_CHUNK_SIZE) == \
        (bp.DEFAULT_BATCH_SIZE, bp.DEFAULT_CHUNK_SIZE)


# -- atomic output and resume -------------------------------------------------------------
class _Interrupt(Exception):
    pass


class _StopAfter:
    """An predictor that is interrupted after ``chunks`` chunks (a failure mid-run)."""

    def __init__(self, predictor, chunks: int) -> None:
        self.predictor, self.left = predictor, chunks
        self.task, self.labels = predictor.task, predictor.labels

    def predict(self, texts, **kw):
        if self.left == 0:
            raise _Interrupt
        self.left -= 1
        return self.predictor.predict(texts, **kw)


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_resume_after_a_failure_and_a_cut_last_line_equals_an_uninterrupted_run(
        predictor, tmp_path, suffix):
    texts = queries(60, seed=6)
    texts[16] = "two\nlines"  # the first one resumed (CSV quotes it over two lines)
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    ref = tmp_path / f"ref.{suffix}"
    predict_file(predictor, data, ref, chunk_size=8, progress=False)
    out = tmp_path / f"out.{suffix}"
    with pytest.raises(_Interrupt):
        predict_file(_StopAfter(predictor, 2), data, out, chunk_size=8, progress=False)
    part = partial_path(out)
    assert not out.exists() and part.exists() and state_path(out).exists()
    done = part.read_bytes()
    assert done == ref.read_bytes()[:len(done)] and done.count(b"\n") >= 16
    # what a kill -9 in the middle of a write leaves: the start of the next record
    rest = ref.read_bytes()[len(done):]
    cut = rest.index(b"two") + 4 if suffix == "csv" else 37  # csv: right after "two\n"
    part.write_bytes(done + rest[:cut])
    result = predict_file(predictor, data, out, chunk_size=5, resume=True, progress=False)
    assert out.read_bytes() == ref.read_bytes()
    assert result.resumed_after is not None and result.kept == 16
    assert result.written == len(texts) - 16
    assert not part.exists() and not state_path(out).exists()


def test_resume_refuses_other_options_and_foreign_files(predictor, tmp_path):
    data = _write_text(tmp_path / "q.txt", queries(30, seed=7))
    out = tmp_path / "o.jsonl"
    with pytest.raises(_Interrupt):
        predict_file(_StopAfter(predictor, 1), data, out, chunk_size=8, progress=False)
    with pytest.raises(ValueError, match=r"other options .*top_k: 3 then, 2 now"):
        predict_file(predictor, data, out, top_k=2, resume=True, progress=False)
    partial_path(out).write_text('{"not": "ours"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="not the output of `headwise predict --data`"):
        predict_file(predictor, data, out, resume=True, progress=False)
    state_path(out).unlink()
    with pytest.raises(ValueError, match="options of the run, is missing"):
        predict_file(predictor, data, out, resume=True, progress=False)
    # without --resume a run starts again, whatever was left
    predict_file(predictor, data, out, progress=False)
    assert len(_jsonl(out)) == 30


def test_resume_of_a_complete_output_predicts_only_the_new_lines(predictor, tmp_path):
    texts = queries(40, seed=8)
    data = _write_text(tmp_path / "log.txt", texts[:25])
    out = tmp_path / "o.csv"
    predict_file(predictor, data, out, progress=False)
    _write_text(data, texts)  # the log grew
    result = predict_file(predictor, data, out, resume=True, progress=False)
    assert (result.resumed_after, result.kept, result.written) == (25, 25, 15)
    predict_file(predictor, data, tmp_path / "all.csv", progress=False)
    assert out.read_bytes() == (tmp_path / "all.csv").read_bytes()


def test_output_file_keeps_nothing_of_a_cut_header(tmp_path):
    out = tmp_path / "o.csv"
    partial_path(out).write_bytes(b"line,text,te")
    f = OutputFile(out, fmt="csv", resume=True)
    assert f.last_line is None and f.records == 0
    f.commit()
    assert out.read_text() == ",".join(bp.CSV_COLUMNS) + "\n"


def test_kill_9_mid_run_then_resume_equals_an_uninterrupted_run(model_dir, predictor, tmp_path):
    data = _write_text(tmp_path / "q.txt", queries(200, seed=9))
    out = tmp_path / "o.jsonl"
    part = partial_path(out)
    cmd = [sys.executable, "-c", SLOW_CLI, "predict", str(model_dir), "--data", str(data),
           "--out", str(out), "--chunk-size", "8", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + 120
    while not (part.exists() and part.read_bytes().count(b"\n") >= 24):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "the run did not start writing"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert not out.exists()  # a killed run never looks complete
    kept = part.read_bytes().count(b"\n")
    assert 24 <= kept < 200
    assert main(["predict", str(model_dir), "--data", str(data), "--out", str(out),
                 "--resume", "--quiet"]) == 0
    ref = tmp_path / "ref.jsonl"
    predict_file(predictor, data, ref, progress=False)
    got, want = out.read_text().splitlines(), ref.read_text().splitlines()
    assert len(got) == len(want) == 200
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"line {i + 1} differs"


# -- memory -------------------------------------------------------------------------------
def test_memory_does_not_grow_with_the_input(predictor, tmp_path):
    """Peak Python memory of a run over 10x the input is that of 1x (chunks of 32). A
    warm-up run as long as the longest fills the interpreter's free lists first (objects
    they keep were allocated before tracing starts), so that a longer run's peak does not
    count them filling up."""
    base = queries(60, seed=10)
    predict_file(predictor, _write_text(tmp_path / "warm.txt", base * 10),
                 tmp_path / "warm.csv", chunk_size=32, progress=False)

    def peak(times: int) -> int:
        data = _write_text(tmp_path / f"x{times}.txt", base * times)
        tracemalloc.start()
        try:
            result = predict_file(predictor, data, tmp_path / f"o{times}.csv", chunk_size=32,
                                  progress=False)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert result.written == 60 * times

    one, ten = peak(1), peak(10)
    assert (tmp_path / "o10.csv").stat().st_size > 9 * (tmp_path / "o1.csv").stat().st_size
    assert ten < 1.25 * one + 64 * 1024, (one, ten)
