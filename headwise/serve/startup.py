"""Load what the service runs, refusing at start-up anything that would fail later.

:func:`load_served_predictor` is :func:`~headwise.intent.inference.load.load_predictor` with a
:class:`ServeConfig`'s settings: the service answers with the very predictor that the
library, ``headwise predict`` and the file stream use; what it adds is about HTTP
(micro-batching of requests, the app). Its one-line runtime report goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from headwise.intent.inference.predictor import Predictor
from headwise.intent.kinds import load_classifier
from headwise.serve.config import ServeConfig

__all__ = ["load_served_predictor"]


def _stderr_line(message: str) -> None:
    print(f"headwise serve: {message}", file=sys.stderr, flush=True)


def load_served_predictor(config: ServeConfig, classifier: Any | None = None, *,
                report: Callable[[str], None] | None = _stderr_line) -> Predictor:
    """The predictor a config describes
    (:func:`~headwise.intent.inference.load.load_predictor`).

    Args:
        config: the service settings (``model_dir`` is loaded unless ``classifier`` is
            given).
        classifier: an already loaded classifier.
        report: receives runtime ``auto``'s one-line note: why it fell back to PyTorch,
            or that it built the cached ONNX export now (default: printed on stderr;
            None: silent).

    Raises:
        ValueError: no model directory and no classifier, or what
            :func:`~headwise.intent.inference.load.load_predictor` refuses.
        FileNotFoundError: as :func:`~headwise.intent.inference.load.load_predictor`.
    """
    from headwise.intent.inference.load import load_predictor

    if classifier is None:
        if not config.model_dir:
            raise ValueError("no model directory given")
        classifier = load_classifier(config.model_dir)
    return load_predictor(classifier, model_dir=config.model_dir or None,
                          runtime=config.runtime, onnx_path=config.onnx_path,
                          threads=config.threads, long_text=config.long_text,
                          chunk_length=config.chunk_length, chunk_stride=config.chunk_stride,
                          max_rows=max(config.max_batch_size, 1), report=report)
