"""``levers.token_dropout``: word dropout on the training inputs. Droppable real tokens
become the unknown token at the asked rate, in training mode only; special tokens, negation
cues, number pieces and padding never do; single-label and multi-label training both run it;
a TF-IDF recipe refuses it."""

from __future__ import annotations

import pytest
import torch
from tiny_corpus import INTENTS

from headwise.intent.training import token_dropout as TD
from headwise.intent.training.losses import SmoothedClassification
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import IntentRecipe
from headwise.intent.training.token_dropout import TokenDropout, token_dropout_for
from headwise.models import EncoderClassifier, preset
from headwise.text import train_tokenizer
from headwise.text.dataset import Example

ZH = ["我不想开通自动还款", "帮我转账500元", "没有收到验证码", "查一下余额", "信用卡丢了"]


def test_the_rate_the_kept_ids_padding_and_eval_mode():
    kept = torch.zeros(50, dtype=torch.bool)
    kept[[0, 1, 7]] = True
    drop = TokenDropout(0.3, replacement_id=1, kept=kept).train()
    torch.manual_seed(0)
    ids = torch.randint(2, 50, (400, 30))
    ids[:, 5] = 7
    mask = torch.ones_like(ids)
    mask[:, 25:] = 0
    ids[:, 25:] = 0
    torch.manual_seed(1)
    out = drop(ids, mask)
    changed = out != ids
    assert bool((out[changed] == 1).all())
    assert not changed[:, 5].any() and not changed[:, 25:].any()
    droppable = (mask.bool() & ~kept[ids]).sum().item()
    rate = changed.sum().item() / droppable
    # binomial: n about 9600, sd about 0.005; a 6-sd band
    assert abs(rate - 0.3) < 0.03
    torch.manual_seed(1)
    assert torch.equal(drop(ids, mask), out)  # the global generator: seeded, repeatable
    assert torch.equal(drop.eval()(ids, mask), ids)
    assert torch.equal(TokenDropout(0.0, 1, kept).train()(ids, mask), ids)
    empty = torch.zeros(0, 4, dtype=torch.long)
    assert drop.train()(empty, empty).shape == (0, 4)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        TokenDropout(1.0, 1, kept)
    with pytest.raises(ValueError, match="replacement_id"):
        TokenDropout(0.1, 50, kept)


def test_negation_cues_clause_breaks_numbers_and_special_tokens_are_kept():
    tok = train_tokenizer([*ZH, "不用了，谢谢。"], kind="char")
    drop = token_dropout_for(tok, 0.5)
    assert drop is not None and drop.replacement_id == tok.unk_token_id
    for piece in (",", "。"):  # a dropped comma would widen a negation's clause
        assert bool(drop.kept[tok.token_to_id(piece)]), piece
    for piece in ("不", "没", "500"):
        i = tok.token_to_id(piece)
        if i is not None:
            assert bool(drop.kept[i]), piece
    for i in (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.unk_token_id):
        if i is not None:
            assert bool(drop.kept[i])
    assert not bool(drop.kept[tok.token_to_id("卡")])
    assert token_dropout_for(tok, 0.0) is None


def test_the_wrapper_drops_in_training_and_not_in_eval():
    tok = train_tokenizer(ZH, kind="char")
    seen = []
    model = EncoderClassifier(preset("tiny", vocab_size=tok.vocab_size, num_labels=2))
    model.register_forward_pre_hook(lambda m, args, kw: seen.append(kw["input_ids"].clone()),
                                    with_kwargs=True)
    wrapper = SmoothedClassification(model, token_dropout=token_dropout_for(tok, 0.6))
    batch = tok(ZH * 8, max_length=32)
    torch.manual_seed(1)
    wrapper.train()(batch["input_ids"], batch["attention_mask"], labels=torch.zeros(40).long())
    wrapper.eval()(batch["input_ids"], batch["attention_mask"])
    assert (seen[0] == tok.unk_token_id).sum() > (batch["input_ids"] == tok.unk_token_id).sum()
    assert torch.equal(seen[1], batch["input_ids"])


def _spy(monkeypatch) -> list[float]:
    """Record the rate of every training-mode call of TokenDropout.forward."""
    calls: list[float] = []
    real = TokenDropout.forward

    def forward(self, input_ids, attention_mask=None):
        out = real(self, input_ids, attention_mask)
        if self.training:
            calls.append(self.p)
        return out

    monkeypatch.setattr(TD.TokenDropout, "forward", forward)
    return calls


def _recipe(kind: str, task: dict | None = None, p: float = 0.2) -> IntentRecipe:
    arch = {"type": kind, "tokenizer": "char", "max_length": 32}
    if kind == "transformer":
        arch.update(d_model=32, num_layers=1, num_heads=4, d_ff=64)
    return IntentRecipe.from_dict({
        "architecture": arch, "levers": {"token_dropout": p},
        "train": {"epochs": 25, "batch_size": 8, "lr": 3e-3, "patience": None, "seed": 0,
                  "progress": False}, **({"task": task} if task else {})})


@pytest.mark.parametrize("kind", ["transformer", "bilstm"])
def test_single_label_training_runs_it_and_still_learns(kind, tmp_path, monkeypatch):
    calls = _spy(monkeypatch)
    rows = [(t, y) for y, texts in INTENTS.items() for t in texts]
    trained = train_intent_classifier(rows * 3, rows, _recipe(kind), out_dir=tmp_path)
    assert calls and set(calls) == {0.2}
    assert trained.classifier.info["recipe"]["levers"]["token_dropout"] == 0.2
    answers = [p.intent for p in trained.classifier.predict([t for t, _ in rows])]
    right = sum(a == y for a, (_, y) in zip(answers, rows, strict=True))
    assert right >= 0.8 * len(rows)  # chance is a third


def test_multi_label_training_runs_it(tmp_path, monkeypatch):
    calls = _spy(monkeypatch)
    rows = [Example(t, (y,), (), i) for i, (y, texts) in enumerate(
        (y, texts) for y, texts in INTENTS.items()) for t in texts]
    train_intent_classifier(rows * 2, rows, _recipe("transformer", {"type": "multi_label"}),
                            out_dir=tmp_path)
    assert calls and set(calls) == {0.2}


def test_recipes_refuse_what_they_cannot_honour():
    with pytest.raises(ValueError, match="levers.token_dropout"):
        _recipe("transformer", p=1.0)
    with pytest.raises(ValueError, match="levers.token_dropout does not apply to the tfidf"):
        IntentRecipe.from_dict({"architecture": {"type": "tfidf"},
                                "levers": {"token_dropout": 0.1}})
