"""Hugging Face's method conventions on headwise models: ``model.save_pretrained(dir)``
and ``Model.from_pretrained(dir)``, beside the functions
(:func:`headwise.models.io.save_model`, :func:`headwise.models.io.load_model`) that do the
work. Users of transformers reach for the methods first; the files are the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from headwise.models.io import load_model, save_model

__all__ = ["PretrainedMixin"]

M = TypeVar("M", bound="PretrainedMixin")


class PretrainedMixin:
    """``save_pretrained`` / ``from_pretrained`` for a model built from a ModelConfig."""

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory``
        (:func:`~headwise.models.io.save_model`; the tokenizer has its own
        ``save_pretrained``, and :func:`headwise.save_pretrained` writes both).

        Returns:
            The directory.
        """
        return save_model(self, directory)  # type: ignore[arg-type]

    @classmethod
    def from_pretrained(cls: type[M], directory: str | Path, **kwargs: Any) -> M:
        """The model saved in ``directory`` by :meth:`save_pretrained`, in eval mode
        (:func:`~headwise.models.io.load_model`; ``num_labels`` replaces the head).

        Raises:
            TypeError: the directory holds another kind of model than ``cls``.
            FileNotFoundError, ValueError: as :func:`~headwise.models.io.load_model`.
        """
        model = load_model(directory, **kwargs)
        if not isinstance(model, cls):
            raise TypeError(f"{directory} holds a {type(model).__name__}, not a "
                            f"{cls.__name__}")
        return model
