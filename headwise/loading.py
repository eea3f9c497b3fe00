"""``save_pretrained`` / ``from_pretrained``: a model and its tokenizer in one directory.

Two layouts load::

    model, tokenizer = headwise.from_pretrained("runs/intent-model")   # saved by headwise
    model, tokenizer = headwise.from_pretrained("path/to/hf-dir")      # BERT, RoBERTa, XLM-R

A headwise directory holds ``config.json`` (a ModelConfig), ``model.safetensors``,
``tokenizer.json`` and ``headwise_tokenizer.json``. A Hugging Face directory holds
``config.json`` (``model_type`` ``"bert"``, ``"roberta"`` or ``"xlm-roberta"``),
``model.safetensors`` and its tokenizer: ``tokenizer.json`` (any fast tokenizer, read by the
``tokenizers`` library itself, so the ids are transformers' own) or ``vocab.txt``. Nothing
is ever downloaded and nothing is unpickled.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer as Backend
from torch import nn

from headwise.models import io
from headwise.models.config import MODEL_TYPES
from headwise.models.pretrained import ENCODER_TYPES, hf_model_type, is_bert_config, load_bert
from headwise.text.tokenizer import TOKENIZER_NAME, Tokenizer


def save_pretrained(model: nn.Module, tokenizer: Tokenizer, directory: str | Path) -> Path:
    """Save a model (safetensors + ``config.json``) and its tokenizer into one directory.

    Args:
        model: any headwise model built from a ModelConfig.
        tokenizer: the tokenizer whose ids the model reads.
        directory: created if needed.

    Returns:
        The directory; :func:`from_pretrained` loads it back bit-exact.

    Raises:
        TypeError: the model carries no ModelConfig.
        ValueError: the config does not describe the model's weights.
    """
    directory = io.save_model(model, directory)
    tokenizer.save(directory)
    return directory


def from_pretrained(path: str | Path, *, num_labels: int | None = None
                    ) -> tuple[nn.Module, Tokenizer]:
    """Load a model and its tokenizer from a local directory, in eval mode.

    Args:
        path: a directory written by :func:`save_pretrained`, or a BERT, RoBERTa or XLM-R
            checkpoint in Hugging Face layout (``config.json``, ``model.safetensors``,
            ``tokenizer.json`` or ``vocab.txt``).
        num_labels: classes of the classification head. For a Hugging Face checkpoint the
            head is always fresh (default 2 classes); for a headwise directory a value that
            differs from the saved one replaces the saved head with a fresh one.

    Returns:
        ``(model, tokenizer)``: ``tokenizer(texts)`` gives ``input_ids`` and
        ``attention_mask``; ``model.encode(input_ids, attention_mask)`` the last hidden
        states (batch, seq, d_model).

    Raises:
        FileNotFoundError: the path, its ``config.json`` or its tokenizer files are missing.
        UnsafeCheckpointError: a pickle checkpoint is where safetensors should be.
        ValueError: a config that is neither headwise's nor one of the Hugging Face
            families, or weights that do not
            match it.
    """
    directory = Path(path)
    if not directory.exists():
        raise FileNotFoundError(f"no model at {directory} (from_pretrained reads local "
                                f"directories only; nothing is downloaded)")
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is a file; from_pretrained takes a directory")
    config_path = directory / io.CONFIG_NAME
    if not config_path.is_file():
        raise FileNotFoundError(f"no {io.CONFIG_NAME} in {directory}")
    try:
        data = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{config_path} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{config_path} does not hold a JSON object")
    if data.get("model_type") in MODEL_TYPES:
        if not (directory / TOKENIZER_NAME).is_file():
            raise FileNotFoundError(f"no {TOKENIZER_NAME} in {directory}; save with "
                                    f"save_pretrained, or load the model alone with "
                                    f"headwise.models.io.load_model")
        return io.load_model(directory, num_labels=num_labels), Tokenizer.from_file(directory)
    if is_bert_config(data):
        model = load_bert(directory, num_labels=2 if num_labels is None else num_labels)
        return model, _hf_tokenizer(directory, hf_model_type(data))
    raise ValueError(f"{config_path} is neither a headwise config (model_type one of "
                     f"{MODEL_TYPES}) nor a Hugging Face BERT, RoBERTa or XLM-R config "
                     f"(model_type one of {ENCODER_TYPES}); got model_type="
                     f"{data.get('model_type')!r}")


#: Hugging Face's special-token names -> headwise's roles
_HF_ROLES = {"pad_token": "pad", "unk_token": "unk", "cls_token": "cls", "sep_token": "sep",
             "mask_token": "mask"}
#: RoBERTa's and XLM-R's roles when a directory names none: BOS/EOS serve as CLS/SEP
_ROBERTA_SPECIAL = {"pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>",
                    "mask": "<mask>"}


def hf_special_tokens(directory: str | Path) -> dict[str, str]:
    """The special tokens a Hugging Face checkpoint directory names, as headwise roles
    (``pad``, ``unk``, ``cls``, ``sep``, ``mask``), from ``special_tokens_map.json`` and
    ``tokenizer_config.json`` (the latter wins). A token may be written as a string or as
    an added-token object (``{"content": ...}``); roles it does not name are left out."""
    directory = Path(directory)
    found: dict[str, str] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = directory / name
        if not path.is_file():
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, role in _HF_ROLES.items():
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and value:
                found[role] = value
    return found


def _hf_tokenizer(directory: Path, model_type: str | None = None) -> Tokenizer:
    """The tokenizer of a Hugging Face checkpoint: its ``tokenizer.json`` when there is one
    (what transformers' fast tokenizer reads: WordPiece, SentencePiece-Unigram or byte-level
    BPE, with its normaliser, pre-tokenizer and post-processor), else BERT's pipeline on
    ``vocab.txt`` (``do_lower_case`` from ``tokenizer_config.json``). Special tokens come
    from the directory's own files."""
    lowercase: bool | None = None
    settings = directory / "tokenizer_config.json"
    if settings.is_file():
        value = json.loads(settings.read_text(encoding="utf-8")).get("do_lower_case")
        lowercase = None if value is None else bool(value)
    defaults = _ROBERTA_SPECIAL if model_type in ("roberta", "xlm-roberta") else {}
    special = {**defaults, **hf_special_tokens(directory)}
    if (directory / TOKENIZER_NAME).is_file():
        return Tokenizer(Backend.from_file(str(directory / TOKENIZER_NAME)),
                         lowercase=lowercase, special_tokens=special)
    if (directory / "vocab.txt").is_file():
        return Tokenizer.from_vocab(directory / "vocab.txt",
                                    lowercase=True if lowercase is None else lowercase,
                                    special_tokens=special)
    raise FileNotFoundError(f"no {TOKENIZER_NAME} or vocab.txt in {directory}")
