"""Models on the attention core: encoder classifier, encoder-decoder, BiLSTM baseline."""

from headwise.models.config import PRESETS, ModelConfig, preset
from headwise.models.encoder import EncoderClassifier, TransformerEncoder, mean_pool

__all__ = [
    "PRESETS",
    "EncoderClassifier",
    "ModelConfig",
    "TransformerEncoder",
    "mean_pool",
    "preset",
]
