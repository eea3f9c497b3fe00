"""Inference runtimes: the same forward pass on PyTorch or on onnxruntime.

A runtime maps a padded batch of token ids to the classifier's logits and to the pooled
vectors the classification head reads (chunk-and-pool averages those; the Mahalanobis and
nearest-neighbour out-of-scope detectors score them)::

    rt = TorchRuntime(clf.model)                     # or OnnxRuntime("model.onnx")
    logits, pooled = rt.forward(input_ids, attention_mask)   # numpy, (b, n) and (b, d)

A joint intent + slot model (:class:`~headwise.models.joint.JointIntentSlotModel`, a
compound classifier's network) also has per-token tag logits; ``forward_joint`` returns
both, on either runtime (its export carries them as a third output, ``tag_logits``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from headwise.onnx import META_QUANTIZED, session_options

__all__ = ["OnnxRuntime", "TorchRuntime", "pooled_vectors"]


def pooled_vectors(model: nn.Module, input_ids: torch.Tensor,
                   attention_mask: torch.Tensor) -> torch.Tensor:
    """The vectors a classifier's head reads: (batch, d) before dropout and the head.

    Args:
        model: an ``EncoderClassifier`` (``encode`` + ``pool``) or a ``BiLSTMClassifier``
            (``pooled``).
        input_ids: (batch, seq) token ids.
        attention_mask: (batch, seq) boolean, True on real tokens.

    Raises:
        TypeError: a model with neither interface.
    """
    if hasattr(model, "encode") and hasattr(model, "pool"):
        return model.pool(model.encode(input_ids, attention_mask), attention_mask)
    if hasattr(model, "pooled"):
        return model.pooled(input_ids, attention_mask)
    raise TypeError(f"{type(model).__name__} has neither encode/pool nor pooled")


class TorchRuntime:
    """The PyTorch forward pass in inference mode.

    Args:
        model: the classifier (put in eval mode if it is in training mode).
        threads: intra-op threads (0 keeps PyTorch's default; the setting is per process).
    """

    name = "torch"

    def __init__(self, model: nn.Module, *, threads: int = 0) -> None:
        # a model in training mode is put in eval mode (dropout off); one already in eval
        # mode is left as it is (eval() walks every module, which a single query notices)
        self.model = model.eval() if model.training else model
        if threads > 0:
            torch.set_num_threads(threads)
        self.device = next(model.parameters()).device

    @torch.inference_mode()
    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """Logits (batch, labels) and pooled vectors (batch, d) of a padded batch.

        Args:
            input_ids: (batch, seq) int64.
            attention_mask: (batch, seq) 0/1 (or boolean).

        Returns:
            ``(logits, pooled)`` as float32 numpy arrays.
        """
        ids = torch.from_numpy(np.ascontiguousarray(input_ids, dtype=np.int64)).to(self.device)
        mask = torch.from_numpy(np.asarray(attention_mask) != 0).to(self.device)
        pooled = pooled_vectors(self.model, ids, mask)
        logits = self.model.classifier(pooled)
        return logits.float().cpu().numpy(), pooled.float().cpu().numpy()

    @torch.inference_mode()
    def forward_joint(self, input_ids: np.ndarray, attention_mask: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray | None]:
        """Intent logits and slot-tag logits of a joint model on a padded batch: the
        model's own forward pass (dropout is off in eval mode).

        Args:
            input_ids: (batch, seq) int64.
            attention_mask: (batch, seq) 0/1 (or boolean).

        Returns:
            ``(logits, tag_logits)`` as float32 numpy arrays, (batch, intents) and
            (batch, seq, tags); ``tag_logits`` is None for a model without a slot tagger.

        Raises:
            TypeError: a model whose forward pass does not return a dict with ``logits``.
        """
        ids = torch.from_numpy(np.ascontiguousarray(input_ids, dtype=np.int64)).to(self.device)
        mask = torch.from_numpy(np.asarray(attention_mask) != 0).to(self.device)
        out = self.model(input_ids=ids, attention_mask=mask)
        if not isinstance(out, dict) or "logits" not in out:
            raise TypeError(f"{type(self.model).__name__} is not a joint intent + slot model")
        tags = out.get("tag_logits")
        return (out["logits"].float().cpu().numpy(),
                None if tags is None else tags.float().cpu().numpy())


class OnnxRuntime:
    """An exported classifier on onnxruntime's CPU execution provider.

    Args:
        path: the ``.onnx`` file written by ``headwise export``.
        threads: intra-op threads (0: onnxruntime's default). Idle threads do not spin.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a file that is not a headwise classifier export (wrong inputs or
            outputs).

    Attributes:
        tagged: whether the file is a joint intent + slot model's with a slot tagger (its
            third output, ``tag_logits``).
    """

    name = "onnx"

    def __init__(self, path: str | Path, *, threads: int = 0) -> None:
        import onnxruntime as ort

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no ONNX file at {path}; write one with `headwise "
                                    f"export MODEL --onnx {path}`")
        # spinning inside a run, none between runs (headwise.onnx.session)
        options = session_options(threads)
        try:
            self.session = ort.InferenceSession(str(path), options,
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise ValueError(f"{path} is not a loadable ONNX model: {e}") from e
        inputs = [i.name for i in self.session.get_inputs()]
        outputs = [o.name for o in self.session.get_outputs()]
        if inputs != ["input_ids", "attention_mask"] or outputs not in (
                ["logits", "pooled"], ["logits", "pooled", "tag_logits"]):
            raise ValueError(f"{path} is not a headwise classifier export: inputs {inputs}, "
                             f"outputs {outputs} (expected input_ids, attention_mask -> "
                             f"logits, pooled[, tag_logits])")
        self.tagged = "tag_logits" in outputs
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        self.path = path

    @property
    def quantized(self) -> bool:
        """Whether the file holds dynamically quantised (int8) weights."""
        return self.metadata.get(META_QUANTIZED) == "int8"

    def forward(self, input_ids: np.ndarray, attention_mask: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """Logits (batch, labels) and pooled vectors (batch, d) of a padded batch."""
        logits, pooled = self.session.run(["logits", "pooled"], {
            "input_ids": np.ascontiguousarray(input_ids, dtype=np.int64),
            "attention_mask": np.ascontiguousarray(attention_mask, dtype=np.int64)})
        return logits, pooled

    def forward_joint(self, input_ids: np.ndarray, attention_mask: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray | None]:
        """Intent logits (batch, intents) and slot-tag logits (batch, seq, tags) of a joint
        intent + slot model's export, as :meth:`TorchRuntime.forward_joint`;
        ``tag_logits`` is None for a file without them (no slot tagger)."""
        feed = {"input_ids": np.ascontiguousarray(input_ids, dtype=np.int64),
                "attention_mask": np.ascontiguousarray(attention_mask, dtype=np.int64)}
        if not self.tagged:
            (logits,) = self.session.run(["logits"], feed)
            return logits, None
        logits, tags = self.session.run(["logits", "tag_logits"], feed)
        return logits, tags
