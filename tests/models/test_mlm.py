"""Masked-LM pre-training: BERT's masking rule and the tied prediction head."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from headwise.models import EncoderClassifier, preset
from headwise.models.mlm import IGNORE_INDEX, MaskedLanguageModel, mask_tokens

SPECIAL = (0, 1, 2, 3, 4)  # pad, unk, cls, sep, mask
MASK_ID, VOCAB = 4, 256


def _ids(batch=400, seq=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (batch, seq), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    ids[: batch // 2, -10:] = 0  # padding on half the rows
    return ids


def test_masking_follows_bert_proportions():
    ids = _ids()
    inputs, labels = mask_tokens(ids, mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL,
                                 generator=torch.Generator().manual_seed(1))
    chosen = labels != IGNORE_INDEX
    ordinary = ~torch.isin(ids, torch.tensor(SPECIAL))
    assert not bool((chosen & ~ordinary).any()), "a special token was chosen"
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen]), "an unchosen token changed"
    share = chosen.sum() / ordinary.sum()
    assert abs(float(share) - 0.15) < 0.01
    n = int(chosen.sum())
    masked = int((inputs[chosen] == MASK_ID).sum())
    kept = int((inputs[chosen] == ids[chosen]).sum())
    assert abs(masked / n - 0.8) < 0.02
    # kept: the 10 % kept plus random draws that hit the same id (1/251 of 10 %)
    assert abs(kept / n - 0.1) < 0.02
    swapped = inputs[chosen & (inputs != MASK_ID) & (inputs != ids)]
    assert not bool(torch.isin(swapped, torch.tensor(SPECIAL)).any()), "random id is special"


def test_every_sequence_gets_a_target_and_masks_are_reproducible():
    ids = torch.tensor([[2, 7, 3, 0, 0], [2, 9, 10, 3, 0]])
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        _, labels = mask_tokens(ids, mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL,
                                probability=0.01, generator=g)
        assert bool(((labels != IGNORE_INDEX).sum(1) >= 1).all())
    a = mask_tokens(_ids(), mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL,
                    generator=torch.Generator().manual_seed(3))
    b = mask_tokens(_ids(), mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL,
                    generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_masking_errors():
    with pytest.raises(ValueError, match="probability"):
        mask_tokens(_ids(), mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL,
                    probability=1.0)
    with pytest.raises(ValueError, match="ordinary"):
        mask_tokens(torch.zeros(1, 3, dtype=torch.long), mask_id=1, vocab_size=2,
                    special_ids=(0,))


def test_loss_equals_full_vocabulary_cross_entropy_and_head_is_tied():
    torch.manual_seed(0)
    model = EncoderClassifier(preset("tiny", num_labels=3)).double()
    mlm = MaskedLanguageModel(model).double().eval()
    ids = _ids(batch=4, seq=12)
    mask = ids != 0
    inputs, labels = mask_tokens(ids, mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL,
                                 probability=0.3, generator=torch.Generator().manual_seed(0))
    out = mlm(inputs, mask, labels=labels)
    # reference: logits at every position by hand, then cross-entropy ignoring the rest
    hidden = model.encode(inputs, mask)
    head = mlm.head
    h = F.layer_norm(F.gelu(hidden @ head.dense.weight.T + head.dense.bias), (32,),
                     head.norm.weight, head.norm.bias, eps=head.norm.eps)
    full = h @ model.encoder.embeddings.word_embeddings.weight.T + head.bias
    ref = F.cross_entropy(full.reshape(-1, full.shape[-1]), labels.reshape(-1),
                          ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(out["loss"].double(), ref)
    assert out["logits"].shape == (int((labels != IGNORE_INDEX).sum()), VOCAB)
    assert head.embedding.weight is model.encoder.embeddings.word_embeddings.weight
    out["loss"].backward()
    assert model.encoder.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    assert model.classifier.weight.grad is None, "the classification head must not train"
