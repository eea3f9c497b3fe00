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
from headwise.models import io

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


def test_a_trained_model_and_its_checkpoints_are_readable_by_group(tmp_path, mask):
    """``headwise train`` (a tiny Transformer blended with TF-IDF, checkpoints kept): every
    file is 0666 less the umask, every folder 0777 less it."""
    rows = [(t, k) for k, ts in INTENTS.items() for t in ts] * 3
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{k}\n" for t, k in rows), encoding="utf-8")
    cfg = tmp_path / "recipe.json"
    cfg.write_text(json.dumps({"d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32,
                               "epochs": 2, "batch_size": 8, "vocab_size": 120}))
    out = tmp_path / "model"
    assert main(["train", "--data", str(data), "--config", str(cfg), "--out", str(out),
                 "--quiet", "--model", "transformer", "--blend", "tfidf",
                 "--keep-checkpoints"]) == 0
    modes = _modes(out)
    assert any(name.endswith(".safetensors") for name in modes)
    assert any(name.startswith("checkpoints/") for name in modes)
    wrong = {name: oct(m) for name, m in modes.items()
             if m != (0o777 if (out / name).is_dir() else 0o666) & ~MASK}
    assert not wrong, f"not following umask {oct(MASK)}: {wrong}"
