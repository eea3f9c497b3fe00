"""Models on the attention core: encoder classifier, joint intent-slot model,
encoder-decoder, BiLSTM baselines (classifier and joint intent-slot model).

Every model module is imported here: each registers its ``model_type`` in
:mod:`headwise.models.registry`, which :func:`build_model` and :func:`load_model` read.
"""

from headwise.models.catalog import PRETRAINED_NAMES, pretrained_info, pretrained_path
from headwise.models.chunked import (
    ChunkPooling,
    HierarchicalEncoder,
    chunk_spans,
    split_into_chunks,
)
from headwise.models.config import PRESETS, ModelConfig, preset
from headwise.models.encoder import EncoderClassifier, TransformerEncoder, mean_pool
from headwise.models.io import load_model, save_model
from headwise.models.joint import JointIntentSlotModel
from headwise.models.joint_heads import JointHeads
from headwise.models.lstm import BiLSTMClassifier
from headwise.models.lstm_joint import BiLSTMJointModel
from headwise.models.pretrained import load_bert, minilm_path
from headwise.models.registry import build_model
from headwise.models.seq2seq import DecoderState, EncoderDecoder, TransformerDecoder

__all__ = [
    "PRESETS",
    "PRETRAINED_NAMES",
    "BiLSTMClassifier",
    "BiLSTMJointModel",
    "ChunkPooling",
    "DecoderState",
    "EncoderDecoder",
    "EncoderClassifier",
    "HierarchicalEncoder",
    "JointHeads",
    "JointIntentSlotModel",
    "ModelConfig",
    "TransformerDecoder",
    "TransformerEncoder",
    "build_model",
    "chunk_spans",
    "load_bert",
    "load_model",
    "mean_pool",
    "minilm_path",
    "preset",
    "pretrained_info",
    "pretrained_path",
    "save_model",
    "split_into_chunks",
]
