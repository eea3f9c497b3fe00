"""Building blocks on the attention core: norms, feed-forward layers, encoder/decoder layers,
embeddings and a depthwise convolution."""

from headwise.nn.block import DecoderLayer, EncoderLayer, maybe_checkpoint
from headwise.nn.depthwise_conv import DepthwiseConvolution
from headwise.nn.dropout import Dropout
from headwise.nn.embedding import TransformerEmbeddings
from headwise.nn.feedforward import FeedForward, GLUFeedForward, build_feedforward
from headwise.nn.norm import LayerNorm, RMSNorm, build_norm

__all__ = [
    "DecoderLayer",
    "DepthwiseConvolution",
    "Dropout",
    "EncoderLayer",
    "FeedForward",
    "GLUFeedForward",
    "LayerNorm",
    "RMSNorm",
    "TransformerEmbeddings",
    "build_feedforward",
    "build_norm",
    "maybe_checkpoint",
]
