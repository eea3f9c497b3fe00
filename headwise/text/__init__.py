"""Text: tokenizers, dataset readers and length-bucketed batching."""

from headwise.text.batching import LengthBucketSampler, pad_collate
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

__all__ = ["DEMO_INTENTS", "DataError", "Dataset", "DemoExample", "Example", "LengthBucketSampler",
           "OOS_LABEL", "SentencePair", "Slot", "Span", "Tokenizer", "category_lexicon",
           "generate_demo_corpus", "pad_collate", "read_demo_jsonl", "read_examples", "read_pairs",
           "split_pairs", "train_char_tokenizer", "train_tokenizer", "unseen_labels",
           "write_demo_corpus"]
