"""Small random Hugging Face checkpoints that transformers builds here (nothing is
downloaded): a Chinese BERT with a character vocabulary, an XLM-R encoder with a Unigram
``tokenizer.json`` and no ``vocab.txt``, and a RoBERTa encoder with byte-level BPE. Each
builder writes a directory that ``transformers.AutoModel`` / ``AutoTokenizer`` and
``headwise.from_pretrained`` both read. Import it after ``pytest.importorskip("transformers")``.
"""

from __future__ import annotations

import tokenizers
import torch
import transformers

#: what a Chinese and English customer-service team sends: CJK, Latin, numbers, full-width
#: digits and letters, emoji, repeated and leading spaces, code-mixing
MIXED = [
    "我的信用卡被冻结了，怎么解冻？",
    "How do I top up my card?",
    "每个月15号还款太早了，能不能改到25号？",
    "我要提前还一部分本金 ５０００元",
    "我的card被冻结了😡",
    "  leading spaces   and   runs",
    "ＡＢＣ全角字母 and 3.5% rate",
    "转账 ¥3,500 到 6222-0000-1111",
    "🙂",
    "不是要取消，是要修改地址",
]

CJK = ("我的信用卡被冻结了怎么解还款每个月号太早能不改到要提前一部分本金元是取消修地址转账全角字母"
       "请问帮查询余额")


def _perturb(model: torch.nn.Module, seed: int = 0) -> None:
    """Move every weight off its initial value so a wrong mapping cannot hide behind a
    default (LayerNorm ones, zero biases, the zero padding rows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


def _save_model(directory, model) -> None:
    _perturb(model)
    model.eval().save_pretrained(directory, safe_serialization=True)


def chinese_bert(directory):
    """A BERT with a character vocabulary (CJK split one by one, as bert-base-chinese)."""
    words = ["how", "do", "top", "up", "my", "card", "rate", "and", "leading", "spaces", "runs",
             "##s", "##ing", "##p", "##u", "##n"]
    chars = sorted(set(CJK)) + list("0123456789.,%¥-?？，") + list("abcdefghijklmnopqrstuvwxyz")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + words + \
        [f"##{c}" for c in "0123456789abcdefghijklmnopqrstuvwxyz"]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n",
                                         encoding="utf-8")
    tok = transformers.BertTokenizerFast(str(directory / "vocab.txt"), do_lower_case=True,
                                         tokenize_chinese_chars=True)
    tok.save_pretrained(directory)
    config = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=32,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    _save_model(directory, transformers.BertModel(config))
    return directory


def _unigram_backend():
    """A SentencePiece-Unigram tokenizer (XLM-R's pipeline) trained on mixed texts."""
    from tokenizers import decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import Unigram
    backend = tokenizers.Tokenizer(Unigram())
    # the pipeline transformers' XLMRobertaTokenizer rebuilds around the file's pieces (it
    # keeps only a Precompiled normaliser, which cannot be made here)
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=300, show_progress=False,
                                      special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                      unk_token="<unk>")
    corpus = MIXED * 3 + [CJK, "transfer money to my account please", "what is the rate"]
    backend.train_from_iterator(corpus, trainer=trainer)
    backend.add_special_tokens(["<mask>"])
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", backend.token_to_id("<s>")),
                        ("</s>", backend.token_to_id("</s>"))])
    return backend


def xlmr_unigram(directory, extra_rows: int = 0):
    """An XLM-R encoder with a Unigram ``tokenizer.json`` and no ``vocab.txt``;
    ``extra_rows`` embedding rows beyond the tokenizer's ids (as multilingual-e5-small's
    config has 250037 rows for 250002 ids)."""
    tok = transformers.XLMRobertaTokenizerFast(tokenizer_object=_unigram_backend(),
                                               bos_token="<s>", eos_token="</s>",
                                               sep_token="</s>", cls_token="<s>",
                                               unk_token="<unk>", pad_token="<pad>",
                                               mask_token="<mask>")
    tok.save_pretrained(directory)
    assert not (directory / "vocab.txt").exists()
    config = transformers.XLMRobertaConfig(
        vocab_size=len(tok) + extra_rows, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64 + 2,
        type_vocab_size=1,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id)
    torch.manual_seed(1)
    _save_model(directory, transformers.XLMRobertaModel(config, add_pooling_layer=False))
    return directory


def roberta_bpe(directory):
    """A RoBERTa encoder with a byte-level BPE tokenizer (GPT-2's byte alphabet)."""
    import tokenizers.processors
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(MIXED * 3 + [CJK, "transfer money to my account please"],
                            vocab_size=400, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    backend = bpe._tokenizer
    backend.post_processor = tokenizers.processors.RobertaProcessing(
        ("</s>", backend.token_to_id("</s>")), ("<s>", backend.token_to_id("<s>")),
        trim_offsets=True, add_prefix_space=False)
    tok = transformers.RobertaTokenizerFast(tokenizer_object=backend, bos_token="<s>",
                                            eos_token="</s>", sep_token="</s>",
                                            cls_token="<s>", unk_token="<unk>",
                                            pad_token="<pad>", mask_token="<mask>")
    tok.save_pretrained(directory)
    config = transformers.RobertaConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64 + 2, type_vocab_size=1,
        pad_token_id=tok.pad_token_id)
    torch.manual_seed(2)
    _save_model(directory, transformers.RobertaForMaskedLM(config))
    return directory


FAMILIES = {"bert-chinese": chinese_bert, "xlm-roberta-unigram": xlmr_unigram,
            "roberta-bpe": roberta_bpe}
