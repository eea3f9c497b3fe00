"""The encoder-decoder: shapes, causality, KV-cache decoding, greedy and beam search
(against brute-force enumeration), padding invariance, training, loss, arguments."""

from __future__ import annotations

import itertools

import pytest
import torch

from headwise.models import preset
from headwise.models.generation import beam_search, greedy_search
from headwise.models.seq2seq import DecoderState, EncoderDecoder

PAD, BOS, EOS = 0, 1, 2


def _model(seed: int = 0, peaky: bool = False, **overrides) -> EncoderDecoder:
    """A float64 tiny model in eval mode. ``peaky`` unties the output projection and
    redraws it (std 0.3) and the token embeddings (std 1) so that next-token
    distributions have clear, varied preferences, EOS included."""
    torch.manual_seed(seed)
    if peaky:
        overrides.setdefault("tie_embeddings", False)
    model = EncoderDecoder(preset("tiny-seq2seq", **overrides)).double().eval()
    if peaky:
        with torch.no_grad():
            model.decoder.embeddings.word_embeddings.weight.normal_(0.0, 1.0)
            model.output_projection.weight.normal_(0.0, 0.3)
    return model


def _padded(ids: torch.Tensor, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad each row to its length: (ids with pad tokens, attention mask)."""
    mask = (torch.arange(ids.shape[1])[None] < torch.tensor(lengths)[:, None]).long()
    return ids * mask, mask


def _lengths(out: torch.Tensor, max_new_tokens: int) -> list[int]:
    """Length of each generated row: up to and including its first EOS, else the maximum."""
    rows = []
    for row in out.tolist():
        rows.append(row.index(EOS) + 1 if EOS in row else max_new_tokens)
    return rows


def test_shapes_and_modes():
    model = _model()
    src, labels = torch.randint(3, 256, (2, 7)), torch.randint(3, 256, (2, 5))
    out = model(src, labels=labels)
    assert out["logits"].shape == (2, 5, 256) and out["loss"].ndim == 0
    memory = model.encode(src)
    assert memory.shape == (2, 7, 32)
    state = model.init_state(2, 6, memory)
    assert isinstance(state, DecoderState) and state.length == 0
    step = model.decode_step(torch.full((2, 1), BOS), memory, state)
    assert step.shape == (2, 1, 256) and state.length == 1
    model.train()
    for beams in (1, 3):
        gen = model.generate(src, max_new_tokens=6, num_beams=beams)
        assert gen.dtype == torch.long and gen.shape[0] == 2 and 1 <= gen.shape[1] <= 6
    assert model.training  # generate runs in eval mode and restores the mode


def test_decoder_is_causal():
    model = _model(1)
    src, dec = torch.randint(3, 256, (2, 7)), torch.randint(3, 256, (2, 6))
    before = model(src, decoder_input_ids=dec)["logits"]
    dec[:, 3] = dec[:, 3] % 200 + 4  # change one token: only its position and later move
    after = model(src, decoder_input_ids=dec)["logits"]
    torch.testing.assert_close(after[:, :3], before[:, :3], rtol=0, atol=1e-12)
    assert (after[:, 3:] - before[:, 3:]).abs().amax() > 1e-6


@pytest.mark.parametrize("options", [
    {}, {"position": "rope"}, {"position": "learned", "norm_first": False},
    {"num_kv_heads": 2, "fusion": "glu", "norm": "rmsnorm", "activation": "swiglu"},
    {"tie_embeddings": False, "extra": {"target_vocab_size": 40}},
])
def test_incremental_decoding_matches_the_full_forward(options):
    model = _model(2, **options)
    src, mask = _padded(torch.randint(3, 40, (3, 7)), [7, 5, 2])
    dec = torch.cat([torch.full((3, 1), BOS), torch.randint(3, 40, (3, 7))], 1)
    full = model(src, mask, decoder_input_ids=dec)["logits"]
    memory = model.encode(src, mask)
    state = model.init_state(3, 8, memory)
    steps = [model.decode_step(dec[:, :3], memory, state, mask)]  # a chunk, then one by one
    steps += [model.decode_step(dec[:, t: t + 1], memory, state, mask) for t in range(3, 8)]
    assert state.length == 8
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-10)
    state.reset()
    torch.testing.assert_close(model.decode_step(dec, memory, state, mask), full,
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generate_with_and_without_the_cache_agree(num_beams):
    model = _model(1, peaky=True, vocab_size=12)
    src, mask = _padded(torch.randint(3, 12, (4, 6)), [6, 4, 6, 3])
    kw = dict(max_new_tokens=10, num_beams=num_beams, length_penalty=0.7)
    cached = model.generate(src, mask, use_cache=True, **kw)
    assert torch.equal(cached, model.generate(src, mask, use_cache=False, **kw))
    assert (cached == EOS).any()  # the check covers finished rows and padding after EOS
    for row, n in zip(cached, _lengths(cached, 10), strict=True):
        assert (row[n:] == PAD).all()


def test_beam_search_with_one_beam_equals_greedy():
    model = _model(2, peaky=True, vocab_size=12)
    src, mask = _padded(torch.randint(3, 12, (4, 6)), [6, 4, 6, 3])
    greedy = model.generate(src, mask, max_new_tokens=12)
    assert (greedy == EOS).any()
    assert torch.equal(model.generate(src, mask, max_new_tokens=12, num_beams=1,
                                      length_penalty=2.0), greedy)
    # the beam-search algorithm itself, one beam, no preference for longer hypotheses
    memory = model.encode(src, mask)
    special = dict(bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, max_new_tokens=12)
    for length_penalty in (0.0, -0.5):
        state = model.init_state(4, 12, memory)

        def step(tokens, state=state):
            return model.decode_step(tokens[:, state.length:], memory, state, mask)[:, -1]

        with torch.inference_mode():
            got = beam_search(step, state.reorder, 4, 1, length_penalty=length_penalty,
                              **special)
        assert torch.equal(got, greedy)
        state.reset()
        with torch.inference_mode():
            assert torch.equal(greedy_search(step, 4, **special), greedy)


def _all_hypotheses(vocab: int, max_len: int) -> list[list[int]]:
    """Every finished hypothesis: EOS after 0 .. max_len - 1 other tokens, or max_len
    tokens without EOS (a beam still alive at the maximum length)."""
    words = [v for v in range(vocab) if v != EOS]
    hyps = [[*p, EOS] for n in range(max_len) for p in itertools.product(words, repeat=n)]
    return hyps + [list(p) for p in itertools.product(words, repeat=max_len)]


def _sum_logprobs(model: EncoderDecoder, src: torch.Tensor, mask: torch.Tensor,
                  hyps: list[list[int]]) -> torch.Tensor:
    """Sum of token log-probabilities of each hypothesis, by teacher forcing."""
    labels = torch.full((len(hyps), max(map(len, hyps))), -100)
    for i, h in enumerate(hyps):
        labels[i, : len(h)] = torch.tensor(h)
    with torch.no_grad():
        logits = model(src.expand(len(hyps), -1), mask.expand(len(hyps), -1),
                       labels=labels)["logits"]
    picked = logits.log_softmax(-1).gather(-1, labels.clamp_min(0)[..., None])[..., 0]
    return (picked * (labels != -100)).sum(1)


def _brute_force_best(model, src, mask, length_penalty, vocab=5, max_len=3) -> list[list[int]]:
    hyps = _all_hypotheses(vocab, max_len)
    best = []
    for row in range(src.shape[0]):
        sums = _sum_logprobs(model, src[row: row + 1], mask[row: row + 1], hyps).tolist()
        scores = [s / len(h) ** length_penalty for s, h in zip(sums, hyps, strict=True)]
        order = sorted(range(len(hyps)), key=lambda i: -scores[i])
        assert scores[order[0]] - scores[order[1]] > 1e-9  # a unique best
        best.append(hyps[order[0]])
    return best


SRC_5 = torch.tensor([[3, 4, 3, 3], [4, 3, 0, 0]])


@pytest.mark.parametrize("length_penalty", [-1.0, 0.0, 1.0, 3.0])
def test_beam_search_finds_the_brute_force_best(length_penalty):
    model = _model(11, peaky=True, vocab_size=5)
    mask = (SRC_5 != PAD).long()
    # 80 beams see every prefix of a 5-token vocabulary up to 3 tokens: an exact search
    kw = dict(max_new_tokens=3, num_beams=80, length_penalty=length_penalty)
    got = model.generate(SRC_5, mask, **kw)
    for row, expect in enumerate(_brute_force_best(model, SRC_5, mask, length_penalty)):
        assert got[row, : len(expect)].tolist() == expect
        assert (got[row, len(expect):] == PAD).all()
    assert torch.equal(model.generate(SRC_5, mask, early_stopping=False, **kw), got)


def test_length_penalty_favours_longer_hypotheses_as_it_grows():
    model = _model(11, peaky=True, vocab_size=5)
    mask = (SRC_5 != PAD).long()
    lengths = [_lengths(model.generate(SRC_5, mask, max_new_tokens=3, num_beams=80,
                                       length_penalty=lp), 3) for lp in (-1.0, 0.0, 1.0, 3.0)]
    for row in range(2):
        per_penalty = [n[row] for n in lengths]
        assert per_penalty == sorted(per_penalty)
    assert any(lengths[-1][row] > lengths[0][row] for row in range(2))


def test_beam_search_stops_early_without_changing_the_result():
    torch.manual_seed(9)
    table = torch.randn(6, 6, dtype=torch.float64) * 2  # a Markov "model": next | last
    table[:, EOS] += 1.5
    calls = []

    def step(tokens):
        calls.append(tokens.shape[1])
        return table[tokens[:, -1]]

    special = dict(bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, max_new_tokens=20)
    for length_penalty in (0.0, 1.0):
        counts, results = [], []
        for early in (True, False):
            calls.clear()
            results.append(beam_search(step, lambda index: None, 3, 4, early_stopping=early,
                                       length_penalty=length_penalty, **special))
            counts.append(len(calls))
        assert torch.equal(*results) and counts[1] == 20
        if length_penalty == 0.0:
            assert counts[0] < 20


def test_early_stopping_waits_for_a_live_beam_that_longer_length_could_make_best():
    # BOS -> EOS (p 0.6) finishes at once; BOS -> a (p 0.3), then a -> a (p 0.98) is a long
    # hypothesis whose length-normalised score (length_penalty 1) beats it only at the end
    logp = torch.full((5, 5), -20.0, dtype=torch.float64)
    logp[BOS, EOS], logp[BOS, 3] = torch.tensor([0.6, 0.3]).log()
    logp[3, 3], logp[3, EOS] = torch.tensor([0.98, 0.01]).log()
    calls = []

    def step(tokens):
        calls.append(tokens.shape[1])
        return logp[tokens[:, -1]]

    special = dict(bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, max_new_tokens=10)
    out = beam_search(step, lambda index: None, 1, 1, length_penalty=1.0, **special)
    assert out.tolist() == [[3] * 10] and len(calls) == 10
    calls.clear()
    out = beam_search(step, lambda index: None, 1, 1, length_penalty=0.0, **special)
    assert out.tolist() == [[EOS]] and len(calls) == 1


def test_min_new_tokens_forbids_an_early_eos():
    model = _model(2, peaky=True, vocab_size=12)
    src, mask = _padded(torch.randint(3, 12, (4, 6)), [6, 4, 6, 3])
    free = _lengths(model.generate(src, mask, max_new_tokens=8), 8)
    assert min(free) < 4
    for beams in (1, 3):
        out = model.generate(src, mask, max_new_tokens=8, min_new_tokens=4, num_beams=beams)
        assert min(_lengths(out, 8)) >= 4 and not (out[:, :3] == EOS).any()
        out = model.generate(src, mask, max_new_tokens=8, min_new_tokens=8, num_beams=beams)
        assert out.shape == (4, 8) and not (out == EOS).any()


def test_padding_does_not_change_real_tokens():
    model = _model(6)
    src, src_mask = _padded(torch.randint(3, 256, (2, 7)), [7, 4])
    tgt, tgt_mask = _padded(torch.randint(3, 256, (2, 6)), [6, 3])
    labels = tgt.masked_fill(tgt_mask == 0, -100)
    batch = model(src, src_mask, labels=labels, decoder_attention_mask=tgt_mask)
    for i, (s, t) in enumerate([(7, 6), (4, 3)]):
        alone = model(src[i: i + 1, :s], labels=labels[i: i + 1, :t])["logits"]
        torch.testing.assert_close(batch["logits"][i: i + 1, :t], alone)
    more = model(torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1),
                 torch.cat([src_mask, torch.zeros(2, 3, dtype=torch.long)], 1),
                 labels=torch.cat([labels, torch.full((2, 2), -100)], 1))
    for i, t in enumerate((6, 3)):  # real target positions (pads differ: no target mask)
        torch.testing.assert_close(more["logits"][i, :t], batch["logits"][i, :t])
    torch.testing.assert_close(more["loss"], batch["loss"])
    for beams in (1, 2):
        gen = model.generate(src, src_mask, max_new_tokens=5, num_beams=beams)
        for i, s in enumerate((7, 4)):
            alone = model.generate(src[i: i + 1, :s], max_new_tokens=5, num_beams=beams)[0]
            assert torch.equal(gen[i, : len(alone)], alone) and (gen[i, len(alone):] == PAD).all()


def test_loss_with_label_smoothing_and_ignored_labels():
    model = _model(7)
    src, labels = torch.randint(3, 256, (2, 7)), torch.randint(3, 256, (2, 5))
    labels[1, 3:] = -100
    real = labels != -100
    for eps in (0.0, 0.1, 0.3):
        out = model(src, labels=labels, label_smoothing=eps)
        logp = out["logits"].log_softmax(-1)
        nll = -logp.gather(-1, labels.clamp_min(0)[..., None])[..., 0]
        smooth = -logp.mean(-1)  # cross-entropy against the uniform distribution
        expect = ((1 - eps) * nll + eps * smooth)[real].mean()
        torch.testing.assert_close(out["loss"], expect)
    # decoder inputs are the labels shifted right, BOS first, ignored labels as pad
    assert model.shift_right(labels).tolist() == [
        [BOS, *labels[0, :4].tolist()], [BOS, *labels[1, :3].tolist(), PAD]]


def test_training_learns_to_reverse():
    torch.manual_seed(0)
    # scaled embeddings (the paper's) let token identity through the sinusoidal positions
    model = EncoderDecoder(preset("tiny-seq2seq", vocab_size=16, scale_embeddings=True))
    src = torch.randint(3, 16, (48, 5))
    labels = torch.cat([src.flip(1), torch.full((48, 1), EOS)], 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, and immune to contention
    try:
        for _ in range(120):
            loss = model(src, labels=labels)["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out = model.generate(src, max_new_tokens=6)
    finally:
        torch.set_num_threads(threads)
    assert min(losses[:20]) < 0.8 * losses[0]
    assert losses[-1] < 0.1 * losses[0]
    assert out.shape == labels.shape and (out == labels).all(1).float().mean() >= 0.9


def test_gradient_checkpointing_gives_the_same_gradients():
    model = _model(8).train()
    src, labels = torch.randint(3, 256, (2, 7)), torch.randint(3, 256, (2, 5))
    params = [p for p in model.parameters() if p.requires_grad]
    grads = []
    for enabled in (False, True):
        model.set_gradient_checkpointing(enabled)
        grads.append(torch.autograd.grad(model(src, labels=labels)["loss"], params))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)


def test_vocabulary_sharing_and_tying():
    model = _model()
    table = model.encoder.embeddings.word_embeddings.weight
    assert model.decoder.embeddings.word_embeddings.weight is table
    assert model.output_projection.weight is table and model.shared_vocabulary
    untied = _model(tie_embeddings=False)
    assert untied.decoder.embeddings.word_embeddings is untied.encoder.embeddings.word_embeddings
    assert untied.output_projection.weight is not untied.encoder.embeddings.word_embeddings.weight
    own = _model(extra={"target_vocab_size": 40})
    assert not own.shared_vocabulary
    assert own.decoder.embeddings.word_embeddings.weight.shape == (40, 32)
    assert own.output_projection.weight is own.decoder.embeddings.word_embeddings.weight
    src = torch.randint(3, 256, (2, 7))
    assert own(src, labels=torch.randint(3, 40, (2, 4)))["logits"].shape == (2, 4, 40)
    assert int(own.generate(src, max_new_tokens=4, num_beams=2).max()) < 40


def test_transformer_base_has_the_papers_shape():
    with torch.device("meta"):
        model = EncoderDecoder(preset("transformer-base"))
    assert len(model.encoder.layers) == 6 and len(model.decoder.layers) == 6
    d, ff, vocab = 512, 2048, 16000
    attn, ffn, norm = 4 * (d * d + d), 2 * d * ff + ff + d, 2 * d
    expect = vocab * d + 6 * (attn + ffn + 2 * norm) + 6 * (2 * attn + ffn + 3 * norm)
    assert sum(p.numel() for p in model.parameters()) == expect  # post-norm: no final norms


def test_generate_under_autocast():
    model = _model(3, vocab_size=12).float()
    src = torch.randint(3, 12, (2, 6))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for use_cache in (True, False):
            out = model.generate(src, max_new_tokens=5, num_beams=2, use_cache=use_cache)
            assert out.shape[0] == 2 and out.shape[1] <= 5


def test_bad_arguments_raise_clear_errors():
    model = _model()
    src = torch.randint(3, 256, (2, 7))
    for kw, err, match in [
        (dict(max_new_tokens=0), ValueError, "max_new_tokens"),
        (dict(num_beams=0), ValueError, "num_beams"),
        (dict(num_beams=2.0), TypeError, "num_beams"),
        (dict(max_new_tokens=3, min_new_tokens=4), ValueError, "min_new_tokens"),
        (dict(length_penalty=float("nan")), ValueError, "length_penalty"),
        (dict(use_cache="yes"), TypeError, "use_cache"),
    ]:
        with pytest.raises(err, match=match):
            model.generate(src, **kw)
    with pytest.raises(ValueError, match="input_ids"):
        model.generate(src[0])
    with pytest.raises(ValueError, match="input_ids"):
        model.generate(src.double())
    with pytest.raises(ValueError, match="attention_mask"):
        model.generate(src, torch.ones(2, 5))
    with pytest.raises(ValueError, match="decoder_input_ids or labels"):
        model(src)
    with pytest.raises(ValueError, match="label_smoothing"):
        model(src, labels=src, label_smoothing=1.0)
    with pytest.raises(ValueError, match="one shape"):
        model(src, decoder_input_ids=src, labels=src[:, :3])
    with pytest.raises(ValueError, match="seq2seq"):
        EncoderDecoder(preset("tiny"))
    with pytest.raises(ValueError, match="num_decoder_layers"):
        EncoderDecoder(preset("tiny-seq2seq", num_decoder_layers=0))
    with pytest.raises(ValueError, match="learned decoder positions"):
        _model(position="learned", max_position=8).generate(src, max_new_tokens=9)
    with pytest.raises(ValueError, match="one self and one memory cache"):
        DecoderState([], [])
