"""Text: tokenizers, the dataset type and its readers (and the encodings of their files),
length-bucketed batching, BIO slot tags, sentence spans, and the Chinese data tables
(banking lexicon, typing slips, challenge-slice names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwise._lazy import lazy_names

if TYPE_CHECKING:
    from headwise.text.annotations import looks_multi_label, read_annotated, read_nlupp
    from headwise.text.banking_lexicon import category_lexicon
    from headwise.text.batching import LengthBucketSampler, pad_collate
    from headwise.text.bio import (
        IGNORE_INDEX,
        bio_tag_names,
        encode_with_tags,
        spans_to_tags,
        tags_to_spans,
        token_offsets,
    )
    from headwise.text.char_level import train_char_tokenizer, train_tokenizer
    from headwise.text.dataset import Dataset, Example, SlotSpan
    from headwise.text.decoding import ENCODING_HINT, decode_lines, detect_encoding
    from headwise.text.labels import OOS_LABEL
    from headwise.text.pairs import SentencePair, read_pairs, split_pairs
    from headwise.text.readers import DataError, read_examples, unseen_labels
    from headwise.text.sentences import sentence_spans
    from headwise.text.tokenizer import Tokenizer

#: public name -> the module that defines it, imported on first use (PEP 562), so that
#: importing one module of this package (a saved classifier's loader, the tokenizer)
#: does not import every other one and its libraries
_LAZY: dict[str, str] = {
    "looks_multi_label": "headwise.text.annotations",
    "read_annotated": "headwise.text.annotations",
    "read_nlupp": "headwise.text.annotations",
    "LengthBucketSampler": "headwise.text.batching",
    "pad_collate": "headwise.text.batching",
    "IGNORE_INDEX": "headwise.text.bio",
    "bio_tag_names": "headwise.text.bio",
    "encode_with_tags": "headwise.text.bio",
    "spans_to_tags": "headwise.text.bio",
    "tags_to_spans": "headwise.text.bio",
    "token_offsets": "headwise.text.bio",
    "train_char_tokenizer": "headwise.text.char_level",
    "train_tokenizer": "headwise.text.char_level",
    "Dataset": "headwise.text.dataset",
    "Example": "headwise.text.dataset",
    "SlotSpan": "headwise.text.dataset",
    "ENCODING_HINT": "headwise.text.decoding",
    "decode_lines": "headwise.text.decoding",
    "detect_encoding": "headwise.text.decoding",
    "OOS_LABEL": "headwise.text.labels",
    "category_lexicon": "headwise.text.banking_lexicon",
    "SentencePair": "headwise.text.pairs",
    "read_pairs": "headwise.text.pairs",
    "split_pairs": "headwise.text.pairs",
    "DataError": "headwise.text.readers",
    "read_examples": "headwise.text.readers",
    "sentence_spans": "headwise.text.sentences",
    "unseen_labels": "headwise.text.readers",
    "Tokenizer": "headwise.text.tokenizer",
}

__all__ = ["ENCODING_HINT", "IGNORE_INDEX", "OOS_LABEL", "DataError", "Dataset", "Example",
           "LengthBucketSampler",
           "SentencePair", "SlotSpan", "Tokenizer", "bio_tag_names", "category_lexicon",
           "decode_lines", "detect_encoding", "encode_with_tags", "looks_multi_label",
           "pad_collate", "read_annotated", "read_examples",
           "read_nlupp", "read_pairs", "sentence_spans", "spans_to_tags", "split_pairs",
           "tags_to_spans",
           "token_offsets", "train_char_tokenizer", "train_tokenizer", "unseen_labels"]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
