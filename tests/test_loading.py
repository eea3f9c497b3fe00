"""``headwise.save_pretrained`` / ``headwise.from_pretrained`` on both directory layouts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import headwise
from headwise.models import EncoderClassifier, preset
from headwise.models.io import UnsafeCheckpointError
from headwise.text.tokenizer import Tokenizer

CORPUS = [f"{w} my {thing} {when}" for w in ("book", "cancel", "move", "check")
          for thing in ("flight", "table", "hotel room", "train ticket")
          for when in ("today", "tomorrow", "next friday")]


def test_round_trip_with_tokenizer(tmp_path):
    tok = Tokenizer.train_wordpiece(CORPUS, vocab_size=100, min_frequency=1)
    torch.manual_seed(0)
    model = EncoderClassifier(preset("tiny", vocab_size=tok.vocab_size, num_labels=4)).eval()
    headwise.save_pretrained(model, tok, tmp_path / "run")
    loaded, loaded_tok = headwise.from_pretrained(tmp_path / "run")
    batch, again = tok(CORPUS[:5]), loaded_tok(CORPUS[:5])
    assert all(torch.equal(batch[k], again[k]) for k in ("input_ids", "attention_mask"))
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    with torch.no_grad():
        hidden = loaded.encode(again["input_ids"], again["attention_mask"])
        assert hidden.shape == (5, again["input_ids"].shape[1], 32)
        assert torch.equal(hidden, model.encode(batch["input_ids"], batch["attention_mask"]))
    relabelled, _ = headwise.from_pretrained(tmp_path / "run", num_labels=9)
    assert relabelled.classifier.out_features == 9


def test_hugging_face_layout(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=32)
    torch.manual_seed(0)
    ref = transformers.BertModel(config).eval()
    ref.save_pretrained(tmp_path)
    words = ["book", "table", "for", "two", "paris", "##s"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    vocab += [f"x{i}" for i in range(30 - len(vocab))]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    model, tok = headwise.from_pretrained(tmp_path, num_labels=3)
    assert isinstance(model, EncoderClassifier) and model.classifier.out_features == 3
    assert tok.lowercase is False and tok.tokenize("Book tables") == ["[UNK]", "table", "##s"]
    batch = tok(["book tables for two", "Paris"])
    with torch.no_grad():
        got = model.encode(batch["input_ids"], batch["attention_mask"])
        expected = ref(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)
    # a headwise save of the imported model loads back bit-exact
    headwise.save_pretrained(model, tok, tmp_path / "saved")
    again, _ = headwise.from_pretrained(tmp_path / "saved")
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in model.state_dict().items())
    # only a pickle checkpoint: refused
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(b"never read")
    with pytest.raises(UnsafeCheckpointError, match="pickle"):
        headwise.from_pretrained(tmp_path)


def test_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        headwise.from_pretrained(tmp_path / "no-such-model")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(NotADirectoryError):
        headwise.from_pretrained(tmp_path / "file.txt")
    with pytest.raises(FileNotFoundError, match="config.json"):
        headwise.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="gpt2"):
        headwise.from_pretrained(tmp_path)
    from headwise.models import io

    io.save_model(EncoderClassifier(preset("tiny")), tmp_path / "bare")
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        headwise.from_pretrained(tmp_path / "bare")


def test_import_headwise_stays_light():
    code = ("import sys, headwise; assert 'torch' not in sys.modules, 'torch imported'; "
            "f = headwise.from_pretrained; import headwise.loading as l; "
            "assert f is l.from_pretrained and headwise.save_pretrained is l.save_pretrained; "
            "assert 'from_pretrained' in dir(headwise)")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError):
        headwise.no_such_name  # noqa: B018
