"""Parallel sentence pairs: the TSV reader and the deterministic hash split."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from headwise.text.pairs import (
    DEFAULT_SPLIT,
    PairFormatError,
    SentencePair,
    read_pairs,
    split_key,
    split_of,
    split_pairs,
)

PAIRS_PY = Path(__file__).resolve().parents[2] / "headwise" / "text" / "pairs.py"


def _reference_split(key: str, fractions: dict[str, float], salt: str = "") -> str:
    """An independent recomputation of the documented rule."""
    u = int(hashlib.sha256((salt + "\x00" + key).encode("utf-8")).hexdigest()[:16], 16) / 2**64
    edge = 0.0
    for name, share in fractions.items():
        edge += share
        if u < edge:
            return name
    raise AssertionError("u >= 1")


def test_read_pairs(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes("Hi.\t嗨。\tCC-BY 2.0 (France) #1 & #2\r\n"
                     "\n"
                     "  Run!  \t 跑！\n"
                     "Tom left.\t汤姆走了。\tattr\textra column\n".encode())
    assert read_pairs(path) == [
        SentencePair("Hi.", "嗨。", "CC-BY 2.0 (France) #1 & #2", 1),
        SentencePair("Run!", "跑！", "", 3),
        SentencePair("Tom left.", "汤姆走了。", "attr", 4),
    ]


@pytest.mark.parametrize("line, why", [("only one column", "expected source<TAB>target"),
                                       ("Hi.\t  \tattr", "empty target"),
                                       ("\t嗨。", "empty source")])
def test_read_pairs_errors_name_the_line(tmp_path, line, why):
    path = tmp_path / "bad.tsv"
    path.write_text(f"Hi.\t嗨。\n\n{line}\n", encoding="utf-8")
    with pytest.raises(PairFormatError, match=f"bad.tsv:3: {why}"):
        read_pairs(path)
    with pytest.raises(FileNotFoundError):
        read_pairs(tmp_path / "missing.tsv")


def test_split_key():
    assert split_key("Wait!") == split_key("wait.") == split_key("  WAIT ") == "wait"
    assert split_key("Tom's  here.") == "tom s here"
    assert split_key("ＡＢＣ　１２３") == "abc 123"  # NFKC: full-width letters, digits, space
    assert split_key("Straße") == "strasse"  # case folding, not just lower()
    assert split_key("I'm 18_years-old...") == "i m 18 years old"


def test_split_of_follows_the_documented_hash():
    three = {"train": 0.8, "valid": 0.1, "test": 0.1}
    keys = [f"sentence {i}" for i in range(300)] + ["", "中文", "wait"]
    for fractions in (DEFAULT_SPLIT, three, {"a": 0.5, "b": 0.5}):
        for salt in ("", "v2"):
            assert [split_of(k, fractions, salt=salt) for k in keys] == [
                _reference_split(k, fractions, salt) for k in keys]
    # pinned: a change of the rule would silently reshuffle every published split
    assert [split_of(k) for k in ("hi", "wait", "tom is here")] == ["valid", "train", "test"]


def test_split_is_stable_across_processes_and_hash_seeds():
    keys = ["hi", "wait", "tom is here", "中文", "sentence 7"]
    code = ("import importlib.util, json, sys\n"
            f"spec = importlib.util.spec_from_file_location('pairs', {str(PAIRS_PY)!r})\n"
            "m = sys.modules['pairs'] = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(m)\n"
            f"print(json.dumps([m.split_of(k) for k in {keys!r}]))")
    outs = []
    for seed in ("1", "2"):  # hash() would differ between these two
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        assert run.returncode == 0, run.stderr
        outs.append(json.loads(run.stdout))
    assert outs[0] == outs[1] == [split_of(k) for k in keys]


def test_split_pairs_keeps_one_source_in_one_split():
    pairs = [SentencePair(f"Sentence number {i}.", f"句子{i}", line=i + 1) for i in range(2000)]
    variants = [SentencePair(f"  sentence NUMBER {i}!", f"另一个{i}") for i in range(0, 2000, 7)]
    splits = split_pairs(pairs + variants)
    assert list(splits) == ["train", "valid", "test"]
    where = {split_key(p.source): name for name, ps in splits.items() for p in ps
             if p.line}
    for name, ps in splits.items():
        assert all(where[split_key(p.source)] == name for p in ps)  # variants follow theirs
        lines = [p.line for p in ps if p.line]
        assert lines == sorted(lines)  # input order kept
    assert sum(map(len, splits.values())) == len(pairs) + len(variants)
    assert splits == split_pairs(pairs + variants)  # deterministic
    # shares near 90/5/5 (binomial sd of a 5 % share of 2000 is ~9.7 pairs)
    counts = {k: sum(1 for p in v if p.line) for k, v in splits.items()}
    assert abs(counts["test"] - 100) < 50 and abs(counts["valid"] - 100) < 50
    assert split_pairs(pairs, salt="other") != split_pairs(pairs)  # another salt, another split
    assert split_pairs([], {"a": 1.0}) == {"a": []}


@pytest.mark.parametrize("fractions", [{}, {"train": 0.9, "test": 0.2},
                                       {"train": 1.0, "test": 0.0}, {"train": 1.1, "x": -0.1}])
def test_bad_fractions(fractions):
    with pytest.raises(ValueError, match="fractions"):
        split_of("x", fractions)
    with pytest.raises(ValueError, match="fractions"):
        split_pairs([], fractions)
