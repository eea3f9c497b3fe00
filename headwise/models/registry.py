"""Which class builds each ``model_type``: the table that :func:`build_model` (and through
it :func:`headwise.models.io.load_model`) reads to rebuild a saved model from its config.

Each model module registers its class beside its definition (``register_model``), as
Hugging Face's ``AutoModel.register`` does: the registry sits under the models and knows
none of them, so saving and loading (:mod:`headwise.models.io`, which the models'
``save_pretrained``/``from_pretrained`` call) never import a model module. Importing any
``headwise.models`` module runs the package's ``__init__`` first, which imports every
model module, so every type of :data:`~headwise.models.config.MODEL_TYPES` is registered
before anything can be built.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from headwise.models.config import MODEL_TYPES, ModelConfig

__all__ = ["MODEL_BUILDERS", "build_model", "register_model"]

#: model_type -> a function that builds a freshly initialised model from a config
MODEL_BUILDERS: dict[str, Callable[[ModelConfig], nn.Module]] = {}


def register_model(model_type: str, build: Callable[[ModelConfig], nn.Module]) -> None:
    """Make :func:`build_model` build ``model_type`` with ``build``.

    Args:
        model_type: one of :data:`~headwise.models.config.MODEL_TYPES`.
        build: a freshly initialised model from a config of that type (a model class
            whose constructor takes the config, or a ``from_config``).

    Raises:
        ValueError: a model type a :class:`~headwise.models.config.ModelConfig` cannot
            carry.
    """
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    MODEL_BUILDERS[model_type] = build


def build_model(config: ModelConfig) -> nn.Module:
    """A freshly initialised model of ``config.model_type``.

    Args:
        config: the architecture.

    Returns:
        ``EncoderClassifier`` (``encoder_classifier``), ``EncoderDecoder`` (``seq2seq``),
        ``BiLSTMClassifier`` (``bilstm``), ``JointIntentSlotModel``
        (``joint_intent_slot``) or ``BiLSTMJointModel`` (``bilstm_joint``).

    Raises:
        ValueError: a model type without a builder.
    """
    if config.model_type not in MODEL_BUILDERS:
        raise ValueError(f"no model is registered for model_type {config.model_type!r}; "
                         f"known: {sorted(MODEL_BUILDERS)}")
    return MODEL_BUILDERS[config.model_type](config)
