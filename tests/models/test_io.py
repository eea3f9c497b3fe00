"""Saving and loading models: bit-exact round trips, tied and pruned weights, refusals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from torch import nn

from headwise.models import EncoderClassifier, ModelConfig, io, preset, registry
from headwise.models.config import MODEL_TYPES


def _assert_same_tensors(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype, k
        assert torch.equal(sa[k], sb[k]), k


def _ids(vocab: int = 256, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (3, 10), generator=g)
    mask = (torch.arange(10)[None] < torch.tensor([10, 6, 2])[:, None]).long()
    return ids * mask, mask


@pytest.mark.parametrize("options", [
    {}, {"position": "rope", "pooling": "mean"}, {"position": "sinusoidal"},
    {"num_kv_heads": 2, "fusion": "glu", "norm": "rmsnorm", "activation": "swiglu"},
    {"norm_first": False, "embedding_norm": True, "type_vocab_size": 2, "num_labels": 4,
     "labels": ["a", "b", "c", "d"]},
])
def test_encoder_classifier_round_trip_is_bit_exact(tmp_path, options):
    torch.manual_seed(0)
    model = EncoderClassifier(preset("tiny", **options)).eval()
    io.save_model(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    loaded = io.load_model(tmp_path)
    assert isinstance(loaded, EncoderClassifier) and not loaded.training
    assert loaded.config == model.config
    _assert_same_tensors(model, loaded)
    ids, mask = _ids()
    with torch.no_grad():
        assert torch.equal(model(ids, mask)["logits"], loaded(ids, mask)["logits"])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtype_is_kept(tmp_path, dtype):
    torch.manual_seed(0)
    model = EncoderClassifier(preset("tiny")).to(dtype).eval()
    io.save_model(model, tmp_path)
    loaded = io.load_model(tmp_path)
    assert next(loaded.parameters()).dtype == dtype
    _assert_same_tensors(model, loaded)


def test_pruned_heads_round_trip(tmp_path):
    torch.manual_seed(0)
    model = EncoderClassifier(preset("tiny")).eval()
    model.encoder.layers[0].attn.prune_heads([1, 3])
    model.encoder.layers[1].attn.set_head_gates([1.0, 0.5, 0.0, 1.0])
    io.save_model(model, tmp_path)
    loaded = io.load_model(tmp_path)
    assert loaded.encoder.layers[0].attn.num_heads == 2
    assert loaded.encoder.layers[0].attn.head_ids.tolist() == [0, 2]
    _assert_same_tensors(model, loaded)
    ids, mask = _ids()
    with torch.no_grad():
        assert torch.equal(model.encode(ids, mask), loaded.encode(ids, mask))


class _TiedToy(nn.Module):
    """A stand-in model whose output projection shares the embedding matrix."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.out = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.out.weight = self.embed.weight

    def forward(self, ids):
        return self.out(self.proj(self.embed(ids)))


@pytest.mark.parametrize("tied", [True, False])
def test_tied_weights_round_trip(tmp_path, monkeypatch, tied):
    monkeypatch.setitem(registry.MODEL_BUILDERS, "seq2seq", _TiedToy)
    torch.manual_seed(0)
    model = _TiedToy(ModelConfig(model_type="seq2seq", vocab_size=50, d_model=8,
                                 num_heads=2, tie_embeddings=tied))
    io.save_model(model, tmp_path)
    loaded = io.load_model(tmp_path)
    assert (loaded.out.weight is loaded.embed.weight) is tied
    _assert_same_tensors(model, loaded)
    ids = torch.arange(10)[None]
    assert torch.equal(model(ids), loaded(ids))


def test_num_labels_gives_a_fresh_head(tmp_path):
    torch.manual_seed(0)
    model = EncoderClassifier(preset("tiny", num_labels=3, labels=["x", "y", "z"]))
    io.save_model(model, tmp_path)
    loaded = io.load_model(tmp_path, num_labels=7)
    assert loaded.classifier.out_features == 7 and loaded.config.labels is None
    a = {k: v for k, v in model.state_dict().items() if not k.startswith("classifier.")}
    b = {k: v for k, v in loaded.state_dict().items() if not k.startswith("classifier.")}
    assert all(torch.equal(a[k], b[k]) for k in a) and a.keys() == b.keys()


def test_bilstm_round_trip(tmp_path):
    lstm = pytest.importorskip("headwise.models.lstm")
    torch.manual_seed(0)
    model = lstm.BiLSTMClassifier(300, 5, embed_dim=16, hidden_size=12, num_layers=2,
                                  pooling="attention", dropout=0.2, pad_token_id=0).eval()
    io.save_model(model, tmp_path)
    assert io.load_config(tmp_path).model_type == "bilstm"
    loaded = io.load_model(tmp_path)
    assert type(loaded) is type(model) and loaded.config == model.config
    _assert_same_tensors(model, loaded)
    ids, mask = _ids(300)
    with torch.no_grad():
        assert torch.equal(model(ids, mask)["logits"], loaded(ids, mask)["logits"])
    assert io.load_model(tmp_path, num_labels=2).classifier.out_features == 2


def test_seq2seq_round_trip(tmp_path):
    seq2seq = pytest.importorskip("headwise.models.seq2seq")
    torch.manual_seed(0)
    model = registry.build_model(preset("tiny-seq2seq"))
    assert isinstance(model, seq2seq.EncoderDecoder)
    io.save_model(model.eval(), tmp_path)
    loaded = io.load_model(tmp_path)
    _assert_same_tensors(model, loaded)
    with pytest.raises(ValueError, match="classifiers"):
        io.load_model(tmp_path, num_labels=3)


@pytest.mark.parametrize("name", ["optimizer.pt", "pytorch_model.bin", "x.pkl", "last.ckpt"])
def test_pickle_files_are_refused(tmp_path, name):
    io.save_model(EncoderClassifier(preset("tiny")), tmp_path)
    (tmp_path / name).write_bytes(b"never read")
    with pytest.raises(io.UnsafeCheckpointError, match=f"{name}.*safetensors"):
        io.load_model(tmp_path)


def test_config_that_does_not_match_the_weights(tmp_path):
    io.save_model(EncoderClassifier(preset("tiny")), tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**data, "d_ff": 48, "num_layers": 3}))
    with pytest.raises(ValueError, match="do not match") as err:
        io.load_model(tmp_path)
    text = str(err.value)
    assert "encoder.layers.2.ffn.w1.weight" in text  # missing
    assert "encoder.layers.0.ffn.w1.weight: saved (64, 32), config gives (48, 32)" in text


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        io.load_model(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="config.json"):
        io.load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    with pytest.raises(ValueError, match="not a headwise model config"):
        io.load_model(tmp_path)
    with pytest.raises(TypeError, match="ModelConfig"):
        io.save_model(nn.Linear(2, 2), tmp_path / "out")
    model = EncoderClassifier(preset("tiny"))
    model.classifier = nn.Linear(32, 9)  # the config still says 2 labels
    with pytest.raises(ValueError, match="classifier.weight"):
        io.save_model(model, tmp_path / "out")


def test_build_model_registry():
    assert isinstance(registry.build_model(preset("tiny")), EncoderClassifier)
    lstm = pytest.importorskip("headwise.models.lstm")
    model = registry.build_model(preset("bilstm", lstm_layers=2, lstm_pooling="last"))
    assert isinstance(model, lstm.BiLSTMClassifier)
    assert model.config["num_layers"] == 2 and model.config["pooling"] == "last"
    assert io.model_config(model) == preset("bilstm", lstm_layers=2, lstm_pooling="last")


def test_every_model_type_is_registered_once_any_models_module_is_imported():
    """The registry knows no model class; the package's ``__init__`` imports every model
    module, so even a fresh interpreter that imports the registry alone builds each type."""
    code = ("from headwise.models.registry import MODEL_BUILDERS; "
            "print(' '.join(sorted(MODEL_BUILDERS)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == sorted(MODEL_TYPES)
    with pytest.raises(ValueError, match="model_type must be one of"):
        registry.register_model("gpt", EncoderClassifier)
