"""Saved models are readable by other users: every file written follows the umask (0644
under the usual 022), as a plain ``open`` does, never safetensors' or ``mkstemp``'s 0600
(``deploy/Dockerfile``'s non-root user reads a mounted model)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from tiny_corpus import INTENTS

from headwise._files import follow_umask, umask
from headwise.cli import main
from headwise.intent.classifier import IntentClassifier
from headwise.intent.decision.ood import OOD_ARRAYS, KnnDetector, save_detector
from headwise.models import io

TEXTS = [t for ts in INTENTS.values() for t in ts]

#: a umask other than the usual 022, so that a file the code chmods to a fixed mode shows
MASK = 0o027


@pytest.fixture
def mask():
    old = os.umask(MASK)
    try:
        yield MASK
    finally:
        os.umask(old)


def _modes(directory):
    """path (relative) -> permission bits, of every file and folder under ``directory``."""
    return {str(p.relative_to(directory)): stat.S_IMODE(p.stat().st_mode)
            for p in sorted(directory.rglob("*"))}


def test_umask_is_read_without_changing_it(mask):
    assert umask() == MASK
    assert umask() == MASK  # reading it left it as it was


def test_follow_umask_gives_a_0600_file_the_mode_open_would(tmp_path, mask):
    made = tmp_path / "made"
    made.write_text("x")
    odd = tmp_path / "odd"
    odd.write_text("x")
    os.chmod(odd, 0o600)
    follow_umask(odd)
    assert stat.S_IMODE(odd.stat().st_mode) == stat.S_IMODE(made.stat().st_mode) == 0o640


def test_the_atomic_writers_follow_the_umask(tmp_path, mask):
    path = io.write_json_atomically(tmp_path / "a.json", {"k": 1})
    assert json.loads(path.read_text()) == {"k": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~MASK
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temporary file left


def _wrong_modes(directory):
    return {name: oct(m) for name, m in _modes(directory).items()
            if m != (0o777 if (directory / name).is_dir() else 0o666) & ~MASK}


def test_trained_models_and_checkpoints_are_readable_by_group(tmp_path, mask):
    """``headwise train`` (a Transformer for one epoch, checkpoints kept; a TF-IDF model),
    then an out-of-scope detector's arrays saved beside it: every file is 0666 less the
    umask, every folder 0777 less it."""
    rows = [(t, k) for k, ts in INTENTS.items() for t in ts] * 3
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in rows), encoding="utf-8")
    net, tfidf = tmp_path / "net", tmp_path / "tfidf"
    assert main(["train", "--data", str(data), "--out", str(net), "--quiet", "--model",
                 "transformer", "--epochs", "1", "--keep-checkpoints"]) == 0
    assert main(["train", "--data", str(data), "--out", str(tfidf), "--quiet", "--model",
                 "tfidf"]) == 0
    clf = IntentClassifier.load(net)
    features, _ = clf.features_and_logits(TEXTS)
    save_detector(KnnDetector(k=2).fit(features, None, None), net)
    names = set(_modes(net)) | set(_modes(tfidf))
    assert {"model.safetensors", "tfidf.safetensors", OOD_ARRAYS, "intent.json"} <= names
    assert any(name.startswith("checkpoints/") and name.endswith(".safetensors")
               for name in names)
    wrong = {**_wrong_modes(net), **_wrong_modes(tfidf)}
    assert not wrong, f"not following umask {oct(MASK)}: {wrong}"
