"""Vocabulary trimming: the same outputs on every kept token, the unknown token's on the
rest, through save/load and ONNX; the reserve follows the checkpoint's piece frequencies."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import headwise
from headwise.intent.training.trimming import kept_token_ids, trim_for_task
from headwise.models.vocab_trim import trim_vocabulary

transformers = pytest.importorskip("transformers")
from hf_checkpoints import MIXED, chinese_bert, xlmr_unigram  # noqa: E402


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory):
    return xlmr_unigram(tmp_path_factory.mktemp("xlmr"))


def test_kept_tokens_give_the_same_hidden_states(xlmr):
    model, tok = headwise.from_pretrained(xlmr, num_labels=3)
    texts = MIXED[:6]
    keep = kept_token_ids(tok, texts, reserve=0)
    assert len(keep) < tok.vocab_size
    trimmed = trim_vocabulary(model, keep, unk_id=tok.unk_token_id)
    assert trimmed.encoder.embeddings.word_embeddings.num_embeddings == len(keep)
    assert trimmed.config.kept_vocab_size == len(keep) and trimmed.config.vocab_size == \
        model.config.vocab_size
    batch = tok(texts)
    with torch.no_grad():
        torch.testing.assert_close(trimmed.encode(**batch), model.encode(**batch),
                                   atol=0, rtol=0)
        torch.testing.assert_close(trimmed(**batch)["logits"], model(**batch)["logits"],
                                   atol=0, rtol=0)


def test_dropped_tokens_read_as_unknown(xlmr):
    model, tok = headwise.from_pretrained(xlmr)
    keep = kept_token_ids(tok, MIXED[:2], reserve=0)
    dropped = next(i for i in range(tok.vocab_size) if i not in set(keep))
    trimmed = trim_vocabulary(model, keep, unk_id=tok.unk_token_id)
    ids = torch.tensor([[0, keep[5], dropped, 2]])
    as_unk = ids.clone()
    as_unk[0, 2] = tok.unk_token_id
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.testing.assert_close(trimmed.encode(ids, mask), model.encode(as_unk, mask),
                                   atol=0, rtol=0)


def test_trimming_twice_and_bad_ids(xlmr):
    model, tok = headwise.from_pretrained(xlmr)
    once = trim_vocabulary(model, range(60), unk_id=tok.unk_token_id)
    twice = trim_vocabulary(once, range(0, 60, 2), unk_id=tok.unk_token_id)
    ids = torch.tensor([[0, 4, 10, 2, 1]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    with torch.no_grad():
        torch.testing.assert_close(twice.encode(ids, mask), model.encode(ids, mask),
                                   atol=0, rtol=0)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        trim_vocabulary(model, [tok.vocab_size + 3], unk_id=tok.unk_token_id)
    with pytest.raises(TypeError, match="not a headwise encoder"):
        trim_vocabulary(torch.nn.Linear(2, 2), [0], unk_id=0)


def test_trimmed_model_saves_loads_and_exports(xlmr, tmp_path):
    from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
    from headwise.onnx.export import export_onnx, max_logit_difference, probe_batches

    model, tok = headwise.from_pretrained(xlmr, num_labels=3)
    trimmed, info = trim_for_task(model, tok, MIXED, reserve=10)
    assert info["parameters_after"] < info["parameters_before"]
    headwise.save_pretrained(trimmed, tok, tmp_path / "m")
    back, tok2 = headwise.from_pretrained(tmp_path / "m")
    batch = tok2(MIXED)
    with torch.no_grad():
        torch.testing.assert_close(back(**batch)["logits"], trimmed(**batch)["logits"],
                                   atol=0, rtol=0)
    path = export_onnx(back, tmp_path / "m.onnx")
    batches = probe_batches(tok.vocab_size, 16, pad_id=tok.pad_token_id, seed=2)
    assert max_logit_difference(TorchRuntime(back), OnnxRuntime(path), batches) <= 1e-4


def test_only_kept_rows_are_trained(xlmr):
    model, tok = headwise.from_pretrained(xlmr, num_labels=2)
    trimmed, _ = trim_for_task(model, tok, MIXED[:3], reserve=0)
    trimmed.train()
    batch = tok(MIXED[:3])
    trimmed(**batch, labels=torch.tensor([0, 1, 0]))["loss"].backward()
    grad = trimmed.encoder.embeddings.word_embeddings.weight.grad
    assert grad is not None and grad.shape[0] == trimmed.config.kept_vocab_size
    assert grad.abs().sum() > 0


def test_reserve_takes_the_highest_unigram_scores(xlmr):
    _, tok = headwise.from_pretrained(xlmr)
    vocab = json.loads((xlmr / "tokenizer.json").read_text())["model"]["vocab"]
    scores = np.array([s for _, s in vocab])
    keep = set(kept_token_ids(tok, [], reserve=7))
    top = set(np.argsort(-scores, kind="stable")[:7].tolist())
    assert top <= keep
    specials = {tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id}
    assert keep - top <= specials | set(tok.backend.get_added_tokens_decoder())


def test_reserve_of_a_wordpiece_vocabulary_is_its_lowest_ids(tmp_path):
    _, tok = headwise.from_pretrained(chinese_bert(tmp_path / "b"))
    keep = kept_token_ids(tok, ["还款"], reserve=12)
    assert set(range(12)) <= set(keep)
    assert set(tok(["还款"])["input_ids"][0].tolist()) <= set(keep)
    with pytest.raises(ValueError, match="reserve"):
        kept_token_ids(tok, [], reserve=-1)
