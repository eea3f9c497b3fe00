"""Chunked / hierarchical encoding of texts longer than the model's maximum length."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from headwise.models import EncoderClassifier, preset
from headwise.models.chunked import ChunkPooling, HierarchicalEncoder, split_into_chunks


def _model(**kw):
    torch.manual_seed(0)
    return EncoderClassifier(preset("tiny", num_labels=3, **kw)).double().eval()


def _ids(n, seed=0):
    return torch.randint(3, 256, (n,), generator=torch.Generator().manual_seed(seed))


# --- split_into_chunks ---------------------------------------------------------------------
def test_split_hand_computed_windows():
    ids = torch.arange(10) + 10
    chunks, mask, spans = split_into_chunks(ids, chunk_len=4, stride=3)
    assert spans == [(0, 4), (3, 7), (6, 10)]
    assert chunks.tolist() == [[10, 11, 12, 13], [13, 14, 15, 16], [16, 17, 18, 19]]
    assert mask.all()
    chunks, mask, spans = split_into_chunks(torch.arange(11) + 10, chunk_len=4, stride=3,
                                            pad_id=-1)
    assert spans[-1] == (9, 11)
    assert chunks[-1].tolist() == [19, 20, -1, -1]
    assert mask[-1].tolist() == [True, True, False, False]


def test_split_with_special_tokens_and_short_text():
    chunks, mask, spans = split_into_chunks([5, 6, 7, 8, 9], chunk_len=5, stride=2, cls_id=1,
                                            sep_id=2)
    # body of 3 text tokens per window, overlap 1
    assert spans == [(0, 3), (2, 5)]
    assert chunks.tolist() == [[1, 5, 6, 7, 2], [1, 7, 8, 9, 2]]
    chunks, mask, spans = split_into_chunks([5, 6], chunk_len=6, stride=4, cls_id=1, sep_id=2)
    assert spans == [(0, 2)]
    assert chunks.tolist() == [[1, 5, 6, 2, 0, 0]]
    assert mask.tolist() == [[True, True, True, True, False, False]]
    chunks, _, _ = split_into_chunks([5, 6, 7], chunk_len=3, stride=1, sep_id=9)
    assert chunks.tolist() == [[5, 6, 9], [6, 7, 9]]


@pytest.mark.parametrize(("seq", "chunk_len", "stride"), [(1, 8, 8), (37, 8, 5), (64, 16, 16),
                                                          (65, 16, 1)])
def test_split_covers_every_token_with_the_stated_overlap(seq, chunk_len, stride):
    ids = _ids(seq)
    chunks, mask, spans = split_into_chunks(ids, chunk_len=chunk_len, stride=stride)
    covered = torch.zeros(seq, dtype=torch.bool)
    for row, m, (s, e) in zip(chunks, mask, spans, strict=True):
        assert s % stride == 0 and int(m.sum()) == e - s
        assert torch.equal(row[: e - s], ids[s:e])
        covered[s:e] = True
    assert covered.all() and spans[-1][1] == seq
    assert all(b[0] - a[0] == stride for a, b in zip(spans, spans[1:], strict=False))
    assert all(a[1] - b[0] == chunk_len - stride for a, b in zip(spans, spans[1:], strict=False))


def test_split_errors():
    with pytest.raises(ValueError, match=r"stride must be an int in \[1, 2\]"):
        split_into_chunks([1, 2, 3], chunk_len=4, stride=3, cls_id=1, sep_id=2)
    with pytest.raises(ValueError, match="stride"):
        split_into_chunks([1, 2, 3], chunk_len=4, stride=0)
    with pytest.raises(ValueError, match="chunk_len"):
        split_into_chunks([1, 2, 3], chunk_len=2, stride=1, cls_id=1, sep_id=2)
    with pytest.raises(ValueError, match="1-D"):
        split_into_chunks(torch.ones(2, 3, dtype=torch.long), chunk_len=4, stride=2)
    with pytest.raises(ValueError, match="non-empty"):
        split_into_chunks([], chunk_len=4, stride=2)
    with pytest.raises(TypeError, match="integer"):
        split_into_chunks(torch.ones(3), chunk_len=4, stride=2)


# --- ChunkPooling --------------------------------------------------------------------------
def test_mean_and_max_pooling_equal_hand_computation_and_ignore_padding():
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    for mode, ref in (("mean", lambda v: v.mean(0)), ("max", lambda v: v.max(0).values)):
        pool = ChunkPooling(6, mode)
        out = pool(x, mask)
        torch.testing.assert_close(out[0], ref(x[0]))
        torch.testing.assert_close(out[1], ref(x[1, :2]))
        torch.testing.assert_close(pool(x[1, :2]), ref(x[1, :2]))  # one text, unbatched
        x2 = x.clone()
        x2[1, 2:] = 1e6  # padding chunks do not matter
        torch.testing.assert_close(pool(x2, mask), out)


def test_attention_pooling_starts_as_mean_and_matches_hand_softmax():
    torch.manual_seed(0)
    pool = ChunkPooling(6, "attention").double()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    out = pool(x, mask)
    torch.testing.assert_close(out[1], x[1, :3].mean(0))  # zero query: uniform weights
    with torch.no_grad():
        pool.query.copy_(torch.randn(6, dtype=torch.float64))
    out = pool(x, mask)
    for b, n in ((0, 5), (1, 3)):
        scores = torch.stack([pool.query @ (pool.key.weight @ x[b, i] + pool.key.bias)
                              for i in range(n)]) / math.sqrt(6)
        w = torch.exp(scores - scores.max())
        torch.testing.assert_close(out[b], (w / w.sum()) @ x[b, :n])
    x2 = x.clone()
    x2[1, 3:] = 100.0
    torch.testing.assert_close(pool(x2, mask), out)


def test_pooling_errors():
    with pytest.raises(ValueError, match="mode must be one of"):
        ChunkPooling(4, "sum")
    pool = ChunkPooling(4)
    with pytest.raises(ValueError, match="chunks must be"):
        pool(torch.randn(3, 5))
    with pytest.raises(ValueError, match="at least one real chunk"):
        pool(torch.randn(2, 3, 4), torch.tensor([[True, False, False], [False] * 3]))


# --- HierarchicalEncoder -------------------------------------------------------------------
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_short_text_equals_the_base_model(pooling):
    model = _model(pooling=pooling)
    hier = HierarchicalEncoder(model, chunk_len=16, stride=12, cls_id=1, sep_id=2)
    ids = _ids(11)
    full = torch.cat([torch.tensor([1]), ids, torch.tensor([2])])[None]
    ref = model.pool(model.encode(full))
    torch.testing.assert_close(hier.encode_long(ids), ref)
    # the encoder's own head is reused: same logits as the base model
    torch.testing.assert_close(hier([ids])["logits"], model(full)["logits"])


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_long_text_pooling_equals_a_hand_loop_over_chunks(mode):
    model = _model(pooling="mean")
    texts = [_ids(100, seed=1), _ids(9, seed=2), _ids(47, seed=3)]
    hier = HierarchicalEncoder(model, chunk_len=24, stride=16, pooling=mode, chunk_batch=3,
                               cls_id=1, sep_id=2)
    out = hier.encode_long(texts)
    assert out.shape == (3, 32)
    for row, ids in zip(out, texts, strict=True):
        vecs = []
        for s in range(0, len(ids), 16):  # windows of 22 text tokens, 16 apart
            piece = torch.cat([torch.tensor([1]), ids[s: s + 22], torch.tensor([2])])[None]
            vecs.append(model.pool(model.encode(piece))[0])
            if s + 22 >= len(ids):
                break
        vecs = torch.stack(vecs)
        torch.testing.assert_close(row, vecs.mean(0) if mode == "mean" else vecs.max(0).values)
    one_by_one = HierarchicalEncoder(model, chunk_len=24, stride=16, pooling=mode, chunk_batch=1,
                                     cls_id=1, sep_id=2)
    torch.testing.assert_close(one_by_one.encode_long(texts), out)


def test_forward_trains_with_gradients_and_eval_keeps_no_graph():
    torch.manual_seed(0)
    model = EncoderClassifier(preset("tiny", pooling="mean"))
    hier = HierarchicalEncoder(model, chunk_len=16, stride=12, pooling="attention",
                               chunk_batch=2, num_labels=4).train()
    texts, labels = [_ids(40, 4), _ids(25, 5)], torch.tensor([1, 3])
    out = hier(texts, labels)
    assert out["logits"].shape == (2, 4)
    torch.testing.assert_close(out["loss"], F.cross_entropy(out["logits"], labels))
    out["loss"].backward()
    layer = model.encoder.layers[0].attn.in_proj.weight
    assert layer.grad is not None and layer.grad.abs().sum() > 0
    assert hier.pooling.query.grad.abs().sum() > 0 and hier.classifier.weight.grad is not None
    opt = torch.optim.Adam(hier.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = hier(texts, labels)["loss"]
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]
    hier.eval()
    assert hier.chunk_vectors(texts)[0].grad_fn is None  # eval: chunks encoded without a graph


def test_frozen_encoder_is_run_without_a_graph_in_training():
    model = _model()
    model.requires_grad_(False)
    hier = HierarchicalEncoder(model, chunk_len=16, stride=8, pooling="attention").double()
    hier.train()
    vecs, counts = hier.chunk_vectors([_ids(30)])
    assert vecs.grad_fn is None and counts == [3]
    assert hier.encode_long(_ids(30)).requires_grad  # the pooling itself still learns


def test_encoder_errors():
    model = _model()
    with pytest.raises(ValueError, match="exceeds the encoder's max_position 128"):
        HierarchicalEncoder(model, chunk_len=129, stride=64)
    with pytest.raises(ValueError, match="stride"):
        HierarchicalEncoder(model, chunk_len=16, stride=16, cls_id=1)
    with pytest.raises(ValueError, match="chunk_batch"):
        HierarchicalEncoder(model, chunk_len=16, stride=8, chunk_batch=0)
    hier = HierarchicalEncoder(model, chunk_len=16, stride=8)
    with pytest.raises(ValueError, match="1-D"):
        hier.encode_long(torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="no texts"):
        hier.encode_long([])
