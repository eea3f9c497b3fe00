"""Text: tokenizers, dataset readers and length-bucketed batching."""

from headwise.text.annotations import (
    AnnotatedDataset,
    AnnotatedExample,
    SlotSpan,
    looks_multi_label,
    read_annotated,
    read_nlupp,
)
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
from headwise.text.demo_corpus import (
    DEMO_INTENTS,
    OOS_LABEL,
    DemoExample,
    Slot,
    Span,
    category_lexicon,
    generate_demo_corpus,
    read_demo_jsonl,
    write_demo_corpus,
)
from headwise.text.pairs import SentencePair, read_pairs, split_pairs
from headwise.text.readers import DataError, Dataset, Example, read_examples, unseen_labels
from headwise.text.tokenizer import Tokenizer

__all__ = ["DEMO_INTENTS", "IGNORE_INDEX", "AnnotatedDataset", "AnnotatedExample", "DataError",
           "Dataset", "DemoExample", "Example", "LengthBucketSampler", "OOS_LABEL",
           "SentencePair", "Slot", "SlotSpan", "Span", "Tokenizer", "bio_tag_names",
           "category_lexicon", "encode_with_tags", "generate_demo_corpus", "looks_multi_label",
           "pad_collate", "read_annotated", "read_demo_jsonl", "read_examples", "read_nlupp",
           "read_pairs", "spans_to_tags", "split_pairs", "tags_to_spans", "token_offsets",
           "train_char_tokenizer", "train_tokenizer", "unseen_labels", "write_demo_corpus"]
