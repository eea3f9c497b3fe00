"""Text: tokenizers, dataset readers and length-bucketed batching."""

from headwise.text.batching import LengthBucketSampler, pad_collate
from headwise.text.tokenizer import Tokenizer

__all__ = ["LengthBucketSampler", "Tokenizer", "pad_collate"]
