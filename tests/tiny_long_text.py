"""A tiny Transformer trained for the long-text tests: the tiny corpus's requests answered,
neutral chatter out of scope; and long messages planting a request in chatter (shared by
the inference and serve tests; tests/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from tiny_corpus import INTENTS
from tiny_models import MAX_LENGTH, TEXTS, tiny_encoder

from headwise.intent.classifier import IntentClassifier
from headwise.text.tokenizer import Tokenizer

NAMES = list(INTENTS)
#: neutral chatter: no word of it is in a request of the tiny corpus
CHATTER = ["hello there", "good morning", "thanks for waiting", "sorry about the delay",
           "please hold on one moment", "ok sure", "enjoy your evening", "nice weather today",
           "thank you kindly", "right ok then"]
REQUEST = "i lost my card"  # card_lost


def chatter(n_sentences: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(CHATTER) for _ in range(n_sentences))


def planted(position: str, n_sentences: int = 12, seed: int = 0) -> str:
    """The request at the start, middle or end of chatter."""
    before = {"start": 0, "middle": n_sentences // 2, "end": n_sentences}[position]
    parts = [chatter(before, seed), REQUEST, chatter(n_sentences - before, seed + 1)]
    return " ".join(p for p in parts if p)


def trained_on_chatter(steps: int = 200) -> IntentClassifier:
    """A tiny Transformer trained on the tiny corpus's requests, alone and with a few words of
    chatter around them, and on spans of chatter pushed towards the uniform answer (outlier
    exposure): a window holding a request is then answered with confidence, one of chatter
    mostly less confidently."""
    rng = random.Random(0)
    words = " ".join(CHATTER).split()

    def span(n: int) -> str:
        start = rng.randrange(len(words))
        return " ".join((words * 2)[start:start + n])

    texts = TEXTS + [f"{span(rng.randint(1, 3))} {t} {span(rng.randint(0, 3))}".strip()
                     for t in TEXTS for _ in range(3)]
    labels = [k for k, ts in INTENTS.items() for _ in ts]
    labels = labels + [k for k in labels for _ in range(3)]
    noise = [span(rng.randint(1, 10)) for _ in range(120)]
    tok = Tokenizer.train_wordpiece((TEXTS + CHATTER) * 3, 160, min_frequency=1)
    model = tiny_encoder(tok, seed=0).train()
    y = torch.tensor([NAMES.index(k) for k in labels])
    enc, enc_noise = tok(texts, max_length=MAX_LENGTH), tok(noise, max_length=MAX_LENGTH)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: one thread is fastest on a shared machine
    try:
        for _ in range(steps):
            opt.zero_grad()
            logits = model(enc["input_ids"], enc["attention_mask"])["logits"]
            out = model(enc_noise["input_ids"], enc_noise["attention_mask"])["logits"]
            loss = F.cross_entropy(logits, y) - 2 * F.log_softmax(out, -1).mean()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    return IntentClassifier(model, tok, NAMES, temperature=1.0, threshold=0.6,
                            max_length=MAX_LENGTH)
