"""Chinese BERT, XLM-R (Unigram ``tokenizer.json``) and RoBERTa (byte-level BPE) imports,
checked against transformers' own tokenizers and models on small random checkpoints that
transformers builds here (nothing is downloaded)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

import headwise
from headwise.attention import positions_from_padding
from headwise.models.pretrained import bert_config
from headwise.text.tokenizer import Tokenizer

transformers = pytest.importorskip("transformers")
from hf_checkpoints import FAMILIES, MIXED, roberta_bpe, xlmr_unigram  # noqa: E402


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def checkpoint(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    return request.param, FAMILIES[request.param](directory)


def test_token_ids_equal_transformers_fast_tokenizer(checkpoint):
    _, directory = checkpoint
    ref = transformers.AutoTokenizer.from_pretrained(directory)
    assert ref.is_fast
    _, tok = headwise.from_pretrained(directory)
    expected = ref(MIXED, padding=True, return_tensors="pt")
    got = tok(MIXED)
    assert torch.equal(got["input_ids"], expected["input_ids"])
    assert torch.equal(got["attention_mask"], expected["attention_mask"])
    assert tok.pad_token_id == ref.pad_token_id
    assert tok.cls_token_id == ref.cls_token_id and tok.sep_token_id == ref.sep_token_id


def test_truncation_keeps_the_end_token_like_transformers(checkpoint):
    _, directory = checkpoint
    ref = transformers.AutoTokenizer.from_pretrained(directory)
    _, tok = headwise.from_pretrained(directory)
    expected = ref(MIXED, padding=True, truncation=True, max_length=7, return_tensors="pt")
    got = tok(MIXED, max_length=7)
    assert torch.equal(got["input_ids"], expected["input_ids"])


def test_character_offsets_equal_transformers(checkpoint):
    """The slot tagger maps tokens back to characters with these offsets."""
    _, directory = checkpoint
    ref = transformers.AutoTokenizer.from_pretrained(directory)
    _, tok = headwise.from_pretrained(directory)
    for text in MIXED:
        expected = ref(text, add_special_tokens=False, return_offsets_mapping=True)
        assert tok.offsets(text) == [tuple(o) for o in expected["offset_mapping"]], text


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_hidden_states_equal_transformers_padding_included(checkpoint, dtype, tol):
    name, directory = checkpoint
    ref = transformers.AutoModel.from_pretrained(directory, torch_dtype=dtype).eval()
    ref_tok = transformers.AutoTokenizer.from_pretrained(directory)
    model, tok = headwise.from_pretrained(directory, num_labels=3)
    model = model.to(dtype)
    batch = tok(MIXED)
    assert batch["input_ids"].shape[1] > 3 and (batch["attention_mask"] == 0).any()
    with torch.no_grad():
        expected = ref(**ref_tok(MIXED, padding=True, return_tensors="pt")).last_hidden_state
        got = model.encode(batch["input_ids"], batch["attention_mask"])
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], expected[real], atol=tol, rtol=0)
    # padded rows too: they attend to the same real keys from their own position
    torch.testing.assert_close(got, expected, atol=tol, rtol=0)
    assert model.config.positions_from_padding == (name != "bert-chinese")


def test_left_padding_moves_positions_like_transformers(tmp_path):
    """RoBERTa positions count real tokens, so left padding gives the same real states."""
    directory = xlmr_unigram(tmp_path / "xlmr")
    ref = transformers.AutoModel.from_pretrained(directory).eval()
    model, tok = headwise.from_pretrained(directory)
    batch = tok(MIXED[:3])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    lengths = mask.sum(1)
    left_ids = torch.full_like(ids, tok.pad_token_id)
    left_mask = torch.zeros_like(mask)
    for i, n in enumerate(lengths.tolist()):
        left_ids[i, ids.shape[1] - n:] = ids[i, :n]
        left_mask[i, ids.shape[1] - n:] = 1
    with torch.no_grad():
        expected = ref(input_ids=left_ids, attention_mask=left_mask).last_hidden_state
        got = model.encode(left_ids, left_mask)
        right = model.encode(ids, mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    for i, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(got[i, ids.shape[1] - n:], right[i, :n], atol=1e-5, rtol=0)


def test_positions_from_padding_hand_computed():
    ids = torch.tensor([[0, 5, 6, 2, 1, 1], [1, 1, 0, 7, 2, 1]])
    assert positions_from_padding(ids, 1).tolist() == [[2, 3, 4, 5, 1, 1], [1, 1, 2, 3, 4, 1]]
    assert positions_from_padding(ids, 0).tolist() == [[0, 1, 2, 3, 4, 5], [1, 2, 0, 3, 4, 5]]


def test_roberta_config_translation():
    data = transformers.XLMRobertaConfig(hidden_size=48, num_hidden_layers=3,
                                         num_attention_heads=6, intermediate_size=96,
                                         max_position_embeddings=514, type_vocab_size=1,
                                         pad_token_id=1).to_dict()
    c = bert_config(data, num_labels=4, pooling="mean")
    assert c.positions_from_padding and c.pad_token_id == 1 and c.max_position == 514
    assert c.type_vocab_size == 1 and c.extra["imported_from"] == "huggingface-xlm-roberta"
    assert not bert_config(transformers.BertConfig().to_dict()).positions_from_padding


def test_masked_lm_prefix_is_stripped(tmp_path):
    directory = roberta_bpe(tmp_path / "r")
    keys = load_file(directory / "model.safetensors")
    assert all(k.startswith(("roberta.", "lm_head.")) for k in keys)
    model, _ = headwise.from_pretrained(directory, num_labels=5)
    assert model.classifier.out_features == 5


def test_directory_without_a_tokenizer_is_refused(tmp_path):
    directory = xlmr_unigram(tmp_path / "x")
    (directory / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer.json or vocab.txt"):
        headwise.from_pretrained(directory)


def test_other_model_types_are_refused(tmp_path):
    directory = xlmr_unigram(tmp_path / "x")
    data = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**data, "model_type": "deberta-v2"}))
    with pytest.raises(ValueError, match="xlm-roberta"):
        headwise.from_pretrained(directory)


@pytest.mark.parametrize("family", ["bert-chinese", "xlm-roberta-unigram"])
def test_input_prefix_equals_transformers_on_the_prefixed_text(family, tmp_path):
    """e5 reads "query: " before every input: the prefix tokens sit in the template, so
    the ids are transformers' own on ``prefix + text`` and the offsets stay the text's."""
    directory = FAMILIES[family](tmp_path / family)
    ref = transformers.AutoTokenizer.from_pretrained(directory)
    _, tok = headwise.from_pretrained(directory)
    prefixed = tok.with_prefix("query: ")
    expected = ref(["query: " + t for t in MIXED], padding=True, return_tensors="pt")
    assert torch.equal(prefixed(MIXED)["input_ids"], expected["input_ids"])
    assert prefixed.lengths(MIXED) == expected["attention_mask"].sum(1).tolist()
    for text in MIXED:
        assert prefixed.offsets(text) == tok.offsets(text)
    head = prefixed.lengths([""])[0] - 1  # [CLS] and the prefix
    truncated = prefixed(MIXED, max_length=head + 3)["input_ids"]
    assert truncated.shape[1] == head + 3
    assert torch.equal(truncated[:, :head], expected["input_ids"][:, :head])
    assert (truncated[:, -1] == tok.sep_token_id).sum() >= 1
    prefixed.save(tmp_path / "saved")
    back = Tokenizer.from_file(tmp_path / "saved")
    assert back.input_prefix == "query: "
    assert torch.equal(back(MIXED)["input_ids"], prefixed(MIXED)["input_ids"])
    with pytest.raises(ValueError, match="already reads"):
        prefixed.with_prefix("passage: ")


def test_input_prefix_is_refused_for_byte_level_bpe(tmp_path):
    _, tok = headwise.from_pretrained(roberta_bpe(tmp_path / "r"))
    with pytest.raises(ValueError, match="RobertaProcessing"):
        tok.with_prefix("query: ")
    assert tok.with_prefix("").input_prefix == ""
