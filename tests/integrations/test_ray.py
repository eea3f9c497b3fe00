"""Ray Data (``headwise.integrations.ray``): ``IntentPredictor`` answers numpy and pandas
batches with the records of ``headwise predict --data``, in ``map_batches`` on a local
cluster too, and ``headwise predict --data DIR --out DIR --ray`` writes, per input file,
the very file ``headwise predict --data FILE`` writes. Skipped without Ray; the local
cluster (``ray.init(num_cpus=2)``) is the session's (``ray_instance`` in conftest.py), as
starting one takes seconds."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tiny_corpus import INTENTS

pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated:DeprecationWarning")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pd = pytest.importorskip("pandas")

from headwise.cli import main  # noqa: E402
from headwise.integrations.ray import RECORD_FIELDS, IntentPredictor, expand_inputs  # noqa: E402
from headwise.intent.batch import predict_file  # noqa: E402
from headwise.intent.classifier import IntentClassifier  # noqa: E402
from headwise.models import EncoderClassifier, ModelConfig  # noqa: E402
from headwise.serve.config import ServeConfig  # noqa: E402
from headwise.serve.startup import load_served_predictor  # noqa: E402
from headwise.text.tokenizer import Tokenizer  # noqa: E402

TEXTS = [t for ts in INTENTS.values() for t in ts]


def queries(n: int, seed: int = 0) -> list[str]:
    words = " ".join(TEXTS).split()
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=int(rng.integers(1, 15)))) for _ in range(n)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tok = Tokenizer.train_wordpiece(TEXTS * 3, 120, min_frequency=1)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=32, num_layers=2, num_heads=4,
                      d_ff=64, max_position=64, pad_token_id=tok.pad_token_id, dropout=0.0,
                      num_labels=3, labels=list(INTENTS))
    model = EncoderClassifier(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    clf = IntentClassifier(model, tok, list(INTENTS), temperature=1.5, threshold=0.4,
                           max_length=12)
    return clf.save(tmp_path_factory.mktemp("ray") / "model")


@pytest.fixture(scope="module")
def cluster(ray_instance):
    ray.data.DataContext.get_current().enable_progress_bars = False


def _reference(model_dir, texts, tmp_path, **options) -> list[dict]:
    """The records ``headwise predict --data`` writes for ``texts``, without ``line``."""
    data = tmp_path / "ref.txt"
    data.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    predictor = load_served_predictor(ServeConfig(model_dir=str(model_dir), warmup=False),
                                      report=None)
    predict_file(predictor, data, tmp_path / "ref.jsonl", progress=False, **options)
    records = [json.loads(x) for x in (tmp_path / "ref.jsonl").read_text().splitlines()]
    for r in records:
        del r["line"]
    return records


def test_predictor_answers_numpy_and_pandas_batches_with_the_records(model_dir, tmp_path):
    texts = queries(30)
    want = _reference(model_dir, texts, tmp_path, top_k=2)
    p = IntentPredictor(model_dir, top_k=2, text_column="message")
    ids = np.arange(len(texts))
    got = p({"id": ids, "message": np.array(texts, dtype=object)})
    assert list(got) == ["id", *RECORD_FIELDS]
    assert np.array_equal(got["id"], ids) and got["out_of_scope"].dtype == np.bool_
    assert [{k: got[k][i] for k in RECORD_FIELDS} for i in range(len(texts))] == [
        {k: r[k] for k in RECORD_FIELDS} for r in want]
    frame = pd.DataFrame({"message": texts, "agent": "bot"}, index=ids + 100)
    out = p(frame)
    assert list(out.columns) == ["agent", *RECORD_FIELDS]
    assert list(out.index) == list(frame.index) and (out["agent"] == "bot").all()
    assert out[list(RECORD_FIELDS)].to_dict("records") == want
    as_json = IntentPredictor(model_dir, top_k=2, text_column="message", output="json")
    lines = as_json({"message": np.array(texts, dtype=object)})["record"]
    assert [json.loads(x) for x in lines] == want
    # what it refuses, naming the column
    with pytest.raises(KeyError, match="no text column 'message'"):
        p({"text": np.array(["hi"])})
    with pytest.raises(ValueError, match="row 1 of the batch has no text in column 'message'"):
        p({"message": np.array(["hi", "  "], dtype=object)})
    with pytest.raises(ValueError, match=r"input columns \['intents'\] have the names"):
        p({"message": np.array(["hi"]), "intents": np.array(["gold"])})
    assert list(p({"message": np.array([], dtype=object)})["intents"]) == []



def test_a_compound_model_answers_with_its_slots_as_predict_data_does(trained_compound_dir,
                                                                     tmp_path):
    """The Ray callable of a compound (multi-label + slots) model: the records of
    ``headwise predict --data``, several intents and the amount slot with its value
    among them (the same predictor; the callable runs in each actor as here)."""
    texts = ["i was charged twice for 75 pounds refund it", "send 50 pounds to my sister",
             "what is the weather today"]
    want = _reference(trained_compound_dir, texts, tmp_path)
    got = IntentPredictor(trained_compound_dir, output="json")({"text": np.array(
        texts, dtype=object)})["record"]
    assert [json.loads(x) for x in got] == want
    assert {x["intent"] for x in want[0]["intents"]} == {"charge", "refund"}
    assert [(s["name"], s["value"]["amount"]) for s in want[1]["slots"]] == [
        ("amount_of_money", 50.0)]

def test_map_batches_over_a_local_cluster_gives_the_records(model_dir, tmp_path, cluster):
    texts = queries(45, seed=1)
    want = _reference(model_dir, texts, tmp_path)
    ds = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
    ds = ds.map_batches(IntentPredictor, batch_size=7, batch_format="pandas",
                        fn_constructor_kwargs={"model": str(model_dir), "output": "json"},
                        compute=ray.data.ActorPoolStrategy(size=2))
    rows = sorted(ds.take_all(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(len(texts)))
    assert [json.loads(r["record"]) for r in rows] == want


def test_ray_command_writes_what_predict_data_writes_per_file(model_dir, tmp_path, cluster,
                                                              capsys):
    inputs = tmp_path / "logs"
    inputs.mkdir()
    (inputs / "a.txt").write_text("".join(t + "\n" for t in queries(70, seed=2)) + "\n"
                                  "last one\n", encoding="utf-8")
    (inputs / "b.csv").write_bytes(b"id,text\n1,i lost my card\n2,\n3,bad \xff\n"
                                   b"4,\"send\nmoney\"\n5,a,b\n")
    (inputs / "c.jsonl").write_text('{"text": "what is my balance"}\n{"txt": 1}\n',
                                    encoding="utf-8")
    (inputs / "d.txt").write_text("\n\n", encoding="utf-8")  # no rows: an empty output
    assert expand_inputs(inputs) == sorted(inputs.iterdir())
    assert expand_inputs(str(inputs / "*.txt")) == [inputs / "a.txt", inputs / "d.txt"]
    out = tmp_path / "labels"
    # one actor holding both CPUs: reading must not wait for a CPU it would never get
    assert main(["predict", str(model_dir), "--data", str(inputs), "--out", str(out),
                 "--ray", "--threads", "2", "--batch-size", "16", "--chunk-size", "32",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"{inputs / 'b.csv'}:3: empty text (skipped)" in err
    assert f"{inputs / 'b.csv'}: skipped 3 bad rows" in err and "from 4 files" in err
    for name in ("a", "b", "c", "d"):
        src = next(inputs.glob(f"{name}.*"))
        ref = tmp_path / f"ref_{name}.jsonl"
        assert main(["predict", str(model_dir), "--data", str(src), "--out", str(ref),
                     "--quiet"]) == 0
        assert (out / f"{name}.jsonl").read_bytes() == ref.read_bytes(), name
    assert sorted(p.name for p in out.iterdir()) == ["a.jsonl", "b.jsonl", "c.jsonl",
                                                     "d.jsonl"]


class _InProcess:
    """The predict_files pipeline run in this process, stage by stage, as the dataset
    the driver iterates (``iter_batches``): the real read and predict stages, no Ray."""

    def __init__(self, model_dir, files, chunk_size: int = 4) -> None:
        from headwise.integrations.ray import _FilePredictor, _read_rows

        predict = _FilePredictor(str(model_dir), fmt="jsonl")
        self.batches = [predict(b) for b in _read_rows(
            {"path": np.array([str(f) for f in files], dtype=object)}, input_format="auto",
            text_column=None, chunk_size=chunk_size)]

    def iter_batches(self, **_):
        return iter(self.batches)


def test_the_driver_writes_in_order_reports_bad_rows_and_stops_when_strict(model_dir,
                                                                           tmp_path):
    from headwise.integrations.ray import _output_names, _write
    from headwise.intent.batch import partial_path
    from headwise.text.readers import DataError

    a, b = tmp_path / "a.txt", tmp_path / "b.csv"
    a.write_text("".join(t + "\n" for t in queries(9, seed=3)), encoding="utf-8")
    b.write_bytes(b"id,text\n1,fine\n2,\n3,also fine\n")
    files = [a, b]
    names = _output_names(files, tmp_path / "out", "jsonl")
    seen = []
    results = _write(_InProcess(model_dir, files), files, names, "jsonl", False,
                     seen.append)
    assert [str(e) for e in seen] == [f"{b}:3: empty text"]
    assert (results[a].written, results[b].written, results[b].skipped) == (9, 2, 1)
    for f in files:
        ref = tmp_path / f"ref_{f.stem}.jsonl"
        assert main(["predict", str(model_dir), "--data", str(f), "--out", str(ref),
                     "--quiet"]) == 0
        assert names[f].read_bytes() == ref.read_bytes()
    strict = _output_names(files, tmp_path / "strict", "jsonl")
    with pytest.raises(DataError, match=r"b.csv:3: empty text"):
        _write(_InProcess(model_dir, files), files, strict, "jsonl", True, None)
    assert strict[a].exists() and not strict[b].exists()  # a done; b never looks complete
    assert partial_path(strict[b]).read_text().count("\n") == 1
    backwards = _InProcess(model_dir, files)
    backwards.batches.append(backwards.batches[0])
    with pytest.raises(RuntimeError, match="came back out of order"):
        _write(backwards, files, _output_names(files, tmp_path / "o2", "jsonl"), "jsonl",
               False, None)
    with pytest.raises(ValueError, match="would all be written to"):
        _output_names([a, tmp_path / "a.csv"], tmp_path / "x", "jsonl")
    with pytest.raises(ValueError, match="is one of the inputs"):
        _output_names([tmp_path / "q.jsonl"], tmp_path, "jsonl")
