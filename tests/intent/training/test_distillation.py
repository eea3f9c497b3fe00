"""Distillation (headwise.intent.training.distillation, ``headwise distill``): the KL term against a
float64 reference and PyTorch's own ``kl_div``, the soft-target-only gradient by hand, the
augmentations, the soft-target cache and unlabelled texts, a crash and resume against an
uninterrupted run, the truncated student against transformers' own hidden states, and the
command end to end."""

from __future__ import annotations

import json
import random
import re
import unicodedata

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from answers import intent_of
from safetensors.torch import load_file
from tiny_corpus import INTENTS, write_csv

from headwise.cli import main
from headwise.intent import IntentRecipe, distill
from headwise.intent.training import augmentation as A
from headwise.intent.training import distillation as D
from headwise.intent.training import losses as objective
from headwise.intent.training import teacher as T
from headwise.intent.training.losses import NO_LABEL, SmoothedClassification, distillation_loss
from headwise.text.negation_tokens import NEGATION_CHARACTERS

ROWS = [(t, k) for k, ts in INTENTS.items() for t in ts]
TINY = {"architecture": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64,
                         "vocab_size": 200},
        "train": {"epochs": 2, "batch_size": 8, "lr": 3e-3, "progress": False}}
UNLABELLED = ["lost card again", "money transfer please", "balance now please",
              "i lost my card"]  # the last is a training text: left out


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A TF-IDF teacher trained on the tiny corpus, saved."""
    from headwise.intent import train_intent_classifier

    out = tmp_path_factory.mktemp("teacher") / "tfidf"
    train_intent_classifier(ROWS * 2, ROWS, IntentRecipe.from_dict({
        "architecture": {"type": "tfidf"},
        "train": {"progress": False}}),
                            out_dir=out)
    return out


# --- the objective ---------------------------------------------------------------------------
def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _reference(s, t, y, temp, alpha, eps, w):
    """a_i T^2 KL(q_T || p_T) + (1 - a_i) CE_eps(y_i), weighted mean, float64 numpy."""
    p, q = _softmax(s / temp), _softmax(t / temp)
    kl = (q * (np.log(q) - np.log(p))).sum(1) * temp ** 2
    k = s.shape[1]
    onehot = np.full_like(s, eps / k)
    has = y != NO_LABEL
    onehot[np.flatnonzero(has), y[has]] += 1 - eps
    ce = -(onehot * np.log(_softmax(s))).sum(1)
    a = np.where(has, alpha, 1.0)
    per = a * kl + (1 - a) * np.where(has, ce, 0.0)
    ww = np.ones(len(y)) if w is None else w[np.where(has, y, t.argmax(1))]
    return float((ww * per).sum() / ww.sum())


@pytest.mark.parametrize("temp", [1.0, 2.5])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_kl_term_matches_a_float64_reference(temp, alpha, weighted):
    g = torch.Generator().manual_seed(0)
    s = torch.randn(7, 5, generator=g, dtype=torch.float64) * 2
    t = torch.randn(7, 5, generator=g, dtype=torch.float64) * 3
    y = torch.tensor([0, NO_LABEL, 4, 2, NO_LABEL, 1, 1])
    w = torch.tensor([0.5, 1.0, 2.0, 1.5, 3.0], dtype=torch.float64) if weighted else None
    got = distillation_loss(s, t, y, temperature=temp, alpha=alpha, label_smoothing=0.1,
                            weight=w)
    want = _reference(s.numpy(), t.numpy(), y.numpy(), temp, alpha, 0.1,
                      None if w is None else w.numpy())
    assert float(got) == pytest.approx(want, rel=1e-12)
    # the teacher's logits are read up to a constant per row (log-probabilities work)
    shifted = t + torch.arange(7, dtype=torch.float64)[:, None] * 10
    assert float(distillation_loss(s, shifted, y, temperature=temp, alpha=alpha,
                                   label_smoothing=0.1, weight=w)) == \
        pytest.approx(want, rel=1e-12)


def test_soft_term_alone_is_torch_kl_div_times_t_squared():
    g = torch.Generator().manual_seed(1)
    s, t = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    y = torch.full((6,), NO_LABEL)
    want = F.kl_div(F.log_softmax(s / 3, -1), F.log_softmax(t / 3, -1), log_target=True,
                    reduction="batchmean") * 9
    torch.testing.assert_close(distillation_loss(s, t, y, temperature=3.0, alpha=0.2), want)
    # alpha 0 on labelled rows is the label-smoothed cross-entropy
    gold = torch.tensor([0, 1, 2, 3, 0, 1])
    torch.testing.assert_close(distillation_loss(s, t, gold, temperature=3.0, alpha=0.0,
                                                 label_smoothing=0.1),
                               F.cross_entropy(s, gold, label_smoothing=0.1))
    for bad, match in (({"temperature": 0.0}, "temperature"), ({"alpha": 1.5}, "alpha")):
        with pytest.raises(ValueError, match=match):
            distillation_loss(s, t, y, **{"temperature": 1.0, "alpha": 0.5, **bad})
    with pytest.raises(ValueError, match="gce_q"):
        SmoothedClassification(torch.nn.Linear(2, 2), gce_q=0.5, distill_temperature=2.0)


class _Linear(torch.nn.Module):
    """A linear student over fixed features: ``input_ids[:, 0]`` picks the row."""

    def __init__(self, features: torch.Tensor, weight: torch.Tensor) -> None:
        super().__init__()
        self.features = features
        self.weight = torch.nn.Parameter(weight.clone())

    def forward(self, input_ids, attention_mask=None):
        return {"logits": self.features[input_ids[:, 0]] @ self.weight.T}


def test_alpha_one_without_gold_labels_learns_from_the_soft_targets_alone():
    """One step's gradient equals the hand-computed ``T (p_T - q_T) x / B``, and gold labels
    change nothing at alpha = 1."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    w0 = torch.randn(4, 3, generator=g, dtype=torch.float64)
    teacher = torch.randn(5, 4, generator=g, dtype=torch.float64)
    ids = torch.arange(5)[:, None]
    temp = 2.0
    p = _softmax((x @ w0.T).numpy() / temp)
    q = _softmax(teacher.numpy() / temp)
    want = temp * (p - q).T @ x.numpy() / 5
    for labels in (torch.full((5,), NO_LABEL), torch.tensor([0, 3, 1, 2, 2])):
        student = _Linear(x, w0)
        wrap = SmoothedClassification(student, label_smoothing=0.1, teacher_weight=1.0,
                                      distill_temperature=temp)
        wrap(ids, labels=labels, teacher=teacher)["loss"].backward()
        np.testing.assert_allclose(student.weight.grad.numpy(), want, rtol=1e-12, atol=1e-15)
        # one SGD step moves the weights by exactly that gradient
        with torch.no_grad():
            student.weight -= 0.5 * student.weight.grad
        np.testing.assert_allclose(student.weight.detach().numpy(), w0.numpy() - 0.5 * want,
                                   rtol=1e-12, atol=1e-15)


# --- augmentation ----------------------------------------------------------------------------
SAMPLES = ["我的信用卡被冻结了，怎么解冻？", "不是要取消，是要修改地址",
           "我要提前还一部分本金 5000元", "每个月15号还款太早了，能不能改到25号？",
           "I did not get my card", "我的card被冻结了"]


def _digits(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text) if c.isdigit())


@pytest.mark.parametrize("kind", list(A.AUGMENTATIONS))
def test_each_augmentation_changes_the_text_and_keeps_digits_and_negations(kind):
    made = []
    for text in SAMPLES:
        for seed in range(4):
            got = A.augment_text(text, [kind], random.Random(seed))
            assert got is not None, text
            new, used = got
            assert used == kind and new != text and abs(len(new) - len(text)) <= 2
            assert _digits(new) == _digits(text)  # amounts and dates decide intents
            assert [c for c in new if c in NEGATION_CHARACTERS] == \
                [c for c in text if c in NEGATION_CHARACTERS]
            assert ("not" in unicodedata.normalize("NFKC", new)) == ("not" in text)
            made.append(new)
    assert len(set(made)) > len(SAMPLES)  # the seed varies the noise
    if kind == "typo":  # the demo corpus's pinyin-input typos, and swapped Latin letters
        assert any(re.search("换款|环款|冻洁|动结|取笑|去消|提钱|题前", t) for t in made)
        assert "I did not get my crad" in made
    if kind == "width":
        assert any("ｃａｒｄ" in t for t in made) and any("５０００" in t for t in made)
    rows = [(t, "x") for t in SAMPLES] + [(SAMPLES[0], None)]
    copies, per_kind = A.augmented_rows(rows, [kind], copies=2, seed=3)
    assert per_kind == {kind: len(copies)} and len(copies) >= len(SAMPLES)
    assert copies == A.augmented_rows(rows, [kind], copies=2, seed=3)[0]  # seeded
    assert copies != A.augmented_rows(rows, [kind], copies=2, seed=4)[0]
    assert {label for _, label in copies} == {"x"}  # a repeated text's copies are not repeated
    assert not {t for t, _ in copies} & set(SAMPLES)


def test_augmentation_options_are_checked():
    assert A.check_augmentations(["all"]) == list(A.AUGMENTATIONS)
    with pytest.raises(ValueError, match="'blur'"):
        A.check_augmentations(["typo", "blur"])
    with pytest.raises(ValueError, match="copies"):
        A.augmented_rows([("a b c", None)], ["typo"], copies=0)
    from headwise.commands.distill import AUGMENTATIONS

    assert AUGMENTATIONS == tuple(A.AUGMENTATIONS)


# --- the whole job: cache, unlabelled texts, resume ------------------------------------------
def _weights(directory):
    return load_file(str(directory / "model.safetensors"))


def test_unlabelled_texts_cache_and_resume_after_a_crash(teacher, tmp_path, monkeypatch):
    """An uninterrupted run learns from the unlabelled texts (their count in info, their rows
    in the soft-target file, NO_LABEL rows in every epoch's batches); a run that crashes in
    its second epoch and is resumed reads its soft targets back and ends with the same
    weights and calibration."""
    seen: list[int] = []
    real_loss = objective.distillation_loss

    def spy(logits, teacher_logits, labels, **kw):
        seen.append(int((labels == NO_LABEL).sum()))
        return real_loss(logits, teacher_logits, labels, **kw)

    monkeypatch.setattr(objective, "distillation_loss", spy)
    recipe = IntentRecipe.from_dict(TINY)  # WordPiece: the same vocabulary in every run
    args = dict(recipe=recipe, unlabelled=UNLABELLED, augment=["typo", "punct"],
                temperature=2.0, alpha=0.7)
    a = distill(teacher, ROWS * 2, ROWS, out_dir=tmp_path / "a", **args)
    info = a.classifier.info["distill"]
    assert info["unlabelled"] == 3 and info["unlabelled_left_out"] == {"a training text": 1}
    assert info["teacher"]["sha256"] == T.directory_fingerprint(teacher)
    assert info["teacher"]["model"] == "tfidf" and info["temperature"] == 2.0
    assert info["augmentation"]["rows"] > 0 and info["soft_targets"]["computed"] > 0
    assert a.classifier.labels == T.load_teacher(teacher).labels
    # the soft-target file holds the unlabelled texts' rows: the teacher's log-probabilities
    meta, logits = T.read_soft_targets(tmp_path / "a")
    clf = T.load_teacher(teacher)
    rows = [meta["texts"].index(t) for t in UNLABELLED[:3]]
    np.testing.assert_allclose(logits[rows], np.log(clf.predict_proba(UNLABELLED[:3])),
                               rtol=0, atol=1e-9)
    # each epoch's batches carried the 3 unlabelled texts and their noisy copies, label-less
    aug, _ = A.augmented_rows(ROWS * 2 + [(t, None) for t in UNLABELLED[:3]],
                              ["typo", "punct"], seed=0,
                              exclude={t for t, _ in ROWS} | set(UNLABELLED))
    assert set(meta["texts"]) == {t for t, _ in ROWS} | set(UNLABELLED) | {t for t, _ in aug}
    assert sum(seen) == 2 * (3 + sum(y is None for _, y in aug))
    monkeypatch.setattr(objective, "distillation_loss", real_loss)

    # the same run, crashed in its second epoch, then resumed
    calls = [0]
    real_forward = SmoothedClassification.forward

    def crash(self, *a_, **kw):
        if self.training:
            calls[0] += 1
            if calls[0] == 10:
                raise RuntimeError("simulated crash")
        return real_forward(self, *a_, **kw)

    monkeypatch.setattr(SmoothedClassification, "forward", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        distill(teacher, ROWS * 2, ROWS, out_dir=tmp_path / "b", **args)
    monkeypatch.setattr(SmoothedClassification, "forward", real_forward)
    assert (tmp_path / "b" / T.TARGETS_FILE).is_file()
    assert not (tmp_path / "b" / "intent.json").exists()

    def no_teacher(*a_, **kw):
        raise AssertionError("the teacher ran again on resume")

    monkeypatch.setattr(T, "teacher_log_probs", no_teacher)
    b = distill(teacher, ROWS * 2, ROWS, out_dir=tmp_path / "b", resume=True, **args)
    assert b.classifier.info["distill"]["soft_targets"]["computed"] == 0
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert b.classifier.temperature == a.classifier.temperature
    assert b.classifier.threshold == a.classifier.threshold


# --- the truncated student -------------------------------------------------------------------
def test_truncated_student_keeps_the_teachers_first_layers(tmp_path):
    """The student's hidden states for kept tokens are transformers' hidden states after K
    layers of the same checkpoint (float64, 1e-10), its vocabulary trimmed; distilled, it
    is a 1-layer classifier of the teacher's intents."""
    transformers = pytest.importorskip("transformers")
    from hf_checkpoints import MIXED, xlmr_unigram

    from headwise.intent import IntentClassifier
    from headwise.intent.training.trimming import trim_for_task
    from headwise.loading import from_pretrained

    hf_dir = xlmr_unigram(tmp_path / "xlmr")
    model, tokenizer = from_pretrained(hf_dir, num_labels=3)
    labels = sorted(INTENTS)
    IntentClassifier(model, tokenizer, labels).save(tmp_path / "teacher")
    teacher = T.load_teacher(tmp_path / "teacher")
    student, trim = trim_for_task(D.truncated_student(teacher, 1), teacher.tokenizer,
                                  MIXED[:6], reserve=0)
    assert trim["kept"] < trim["vocab_size"] and student.config.num_layers == 1
    hf = transformers.AutoModel.from_pretrained(hf_dir).double().eval()
    batch = teacher.tokenizer(MIXED[:6], max_length=64)
    ids, mask = batch["input_ids"], batch["attention_mask"].bool()
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask.long(),
                  output_hidden_states=True).hidden_states[1]
        got = student.double().eval().encode(ids, mask)
    assert float((got - want).abs()[mask].max()) < 1e-10
    # the head is the teacher's
    torch.testing.assert_close(student.classifier.weight,
                               teacher.model.classifier.weight.double())
    with pytest.raises(ValueError, match=r"K must be in 1\.\.2"):
        D.truncated_student(teacher, 3)
    # a blended teacher (the network and TF-IDF, levers.blend="tfidf") is cut at its network
    from headwise.intent.ensemble import EnsembleClassifier
    from headwise.intent.training.tfidf_selection import fit_tfidf

    texts, ys = zip(*ROWS, strict=True)
    tfidf = fit_tfidf(list(texts), list(ys), c=10.0)
    assert tfidf.labels == labels
    blended = EnsembleClassifier([teacher, tfidf], weights=[0.6, 0.4])
    cut, plain = D.truncated_student(blended, 1).state_dict(), D.truncated_student(
        teacher, 1).state_dict()
    assert cut.keys() == plain.keys() and all(torch.equal(cut[k], plain[k]) for k in cut)
    with pytest.raises(ValueError, match="exactly one Transformer-encoder member"):
        D.truncated_student(EnsembleClassifier([tfidf, tfidf]), 1)
    for spec in ("truncate:0", "truncate:x", "truncate"):
        with pytest.raises(ValueError, match="truncate"):
            D.parse_student(spec)

    run = distill(tmp_path / "teacher", ROWS, ROWS, out_dir=tmp_path / "student",
                  student="truncate:1", recipe=IntentRecipe.from_dict({
                      "train": {"epochs": 1, "batch_size": 8, "progress": False}}))
    assert run.classifier.model.config.num_layers == 1
    assert run.classifier.labels == labels
    assert run.classifier.info["distill"]["teacher"]["layers"] == 2
    # it fine-tunes from the teacher's own head: no LP-FT unless asked for
    assert run.classifier.info["recipe"]["levers"]["linear_probe"] is False
    assert run.classifier.info["linear_probe"] is None
    assert not (tmp_path / "student" / T.STUDENT_INIT).exists()
    assert run.classifier.predict(["my card was stolen"])[0].intent in labels + ["out_of_scope"]


# --- the command -----------------------------------------------------------------------------


def test_cli_distill_then_predict_json(teacher, tmp_path, capsys):
    train = write_csv(tmp_path / "train.csv", ROWS * 2)
    valid = write_csv(tmp_path / "valid.csv", ROWS + [("tell me a joke", "oos")])
    unl = tmp_path / "unlabelled.txt"
    unl.write_text("\n".join(UNLABELLED[:3]) + "\n\n", encoding="utf-8")
    cfg = tmp_path / "student.json"
    cfg.write_text(json.dumps({"architecture": TINY["architecture"],
                               "train": {**TINY["train"], "epochs": 1}}))
    out = tmp_path / "student"
    base = ["distill", str(teacher), "--data", str(train), "--valid", str(valid), "--out",
            str(out), "--config", str(cfg), "--quiet"]
    assert main(base + ["--unlabelled", str(unl), "--augment", "typo,width:2", "--alpha",
                        "0.8", "--temperature", "3", "--set", "train.seed=3"]) == 0
    text = capsys.readouterr().out
    assert "unlabelled texts: 3" in text and "soft targets:" in text and "saved to" in text
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["distill"]["alpha"] == 0.8 and summary["distill"]["temperature"] == 3.0
    assert summary["distill"]["augmentation"]["kinds"] == ["typo", "width"]
    assert summary["distill"]["augmentation"]["copies"] == 2
    assert summary["recipe"]["train"]["seed"] == 3
    assert summary["oos_threshold"]["n_oos"] == 1
    assert main(["predict", str(out), "--json", "i lost my card", "send money abroad"]) == 0
    answers = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [a["text"] for a in answers] == ["i lost my card", "send money abroad"]
    assert all(intent_of(a) in set(INTENTS) | {"out_of_scope"} for a in answers)

    bad = tmp_path / "bad"
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"architecture": {"type": "bilstm"}, "train": {"epochs": 1}}))
    for extra, message in ((["--alpha", "1.5"], "--alpha"),
                           (["--temperature", "0"], "--temperature"),
                           (["--student", "truncate:2"], "Transformer-encoder teacher"),
                           (["--student", "distilbert"], "transformer, bilstm or truncate"),
                           (["--augment", "blur"], "'blur'"),
                           (["--augment", "typo:0"], "--augment typo:0: the copies"),
                           (["--augment", ":2"], "names no kind of noise"),
                           (["--set", "architecture.type=bilstm"], "chosen by --student"),
                           (["--config", str(named)], "chosen by --student"),
                           (["--out", str(teacher)], "the teacher's directory")):
        argv = base[:7] + [str(bad), "--quiet"] + extra  # no --config: the recipe's checks
        assert main(argv) == 1, extra
        assert message in capsys.readouterr().err


def test_a_weighted_ensemble_teacher_gives_the_log_of_its_blended_probabilities(teacher,
                                                                                tmp_path):
    """A blend (TF-IDF models in a weighted ensemble, as ``--set levers.blend=tfidf``
    saves one) is a teacher too: its soft targets are the log of the weighted mean of the members'
    probabilities, computed here from the members themselves, and a student distils from
    its saved directory."""
    from headwise.intent import train_intent_classifier
    from headwise.intent.ensemble import EnsembleClassifier

    other = tmp_path / "tfidf-c1"
    train_intent_classifier(ROWS * 2, ROWS, IntentRecipe.from_dict({
        "architecture": {"type": "tfidf", "c": 1.0},
        "train": {"progress": False}}), out_dir=other)
    members = [T.load_teacher(teacher), T.load_teacher(other)]
    EnsembleClassifier(members, weights=[0.3, 0.7]).save(tmp_path / "blend")
    blend = T.load_teacher(tmp_path / "blend")
    texts = ["i lost my card", "send money to my friend", "what is my balance"]
    want = np.log(0.3 * members[0].predict_proba(texts) + 0.7 * members[1].predict_proba(texts))
    np.testing.assert_allclose(T.teacher_log_probs(blend, texts, progress=False), want,
                               rtol=0, atol=1e-12)
    run = distill(tmp_path / "blend", ROWS * 2, ROWS, out_dir=tmp_path / "student",
                  recipe=IntentRecipe.from_dict(TINY))
    info = run.classifier.info["distill"]
    assert info["teacher"]["model"] == "ensemble of 2"
    assert info["teacher"]["sha256"] == T.directory_fingerprint(tmp_path / "blend")
    assert run.classifier.labels == blend.labels
