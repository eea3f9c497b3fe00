"""The ``architecture`` part of a recipe, a tagged choice: :class:`Transformer` (from
scratch), :class:`BiLSTM` (the baseline), :class:`PretrainedEncoder` (an imported checkpoint
with a fresh head) or :class:`Tfidf` (TF-IDF features and a logistic regression, no network);
each owns the fields of its architecture, so a field another architecture reads cannot be
written."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from headwise.intent.training.defaults import (
    DEFAULT_TRANSFORMER_OVERRIDES,
    DEFAULT_TRANSFORMER_POSITION,
)
from headwise.intent.training.recipe.fields import (
    check_c,
    check_choice,
    check_overrides,
    check_types,
)
from headwise.text.tokenizer import PRE_SPLITS

__all__ = ["ARCHITECTURES", "Architecture", "BiLSTM", "PretrainedEncoder", "Tfidf",
           "Transformer", "architecture_from_spec"]


@dataclass
class Transformer:
    """The from-scratch Transformer encoder; its shape fields are
    :class:`~headwise.models.config.ModelConfig`'s, under its names.

    Attributes:
        tokenizer: ``"auto"`` (character level for Chinese, WordPiece otherwise),
            ``"char"`` or ``"wordpiece"``, trained on the training texts.
        vocab_size: WordPiece vocabulary size (a character vocabulary takes what it needs,
            so it is refused beside ``tokenizer="char"``).
        max_length: longest input in tokens, special tokens included (ModelConfig's
            ``max_position``).
        d_model: hidden size.
        num_layers: encoder layers.
        num_heads: attention heads per layer (``d_model`` must divide by it).
        d_ff: feed-forward size (None: ``2 * d_model``).
        fusion: how the heads' outputs are combined (ModelConfig ``fusion``).
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        position: position encoding (ModelConfig ``position``; default rotary,
            :data:`~headwise.intent.training.defaults.DEFAULT_TRANSFORMER_POSITION`).
        pooling: how token vectors become one (ModelConfig ``pooling``): ``"mean"``,
            ``"cls"`` (the first token) or ``"max"`` (element-wise maximum over real
            tokens; ``headwise inspect``'s head analysis reads cls- and mean-pooled
            models only).
        dropout: dropout of the embeddings and sublayers.
        attention_dropout: dropout of the attention weights.
        model_overrides: further ModelConfig fields, null (the default) taking
            number-aware heads 0 and 1 and clause-scoped negation-aware heads 2 and 3 on
            layers of at least 4 heads (a dict given replaces them, ``{}`` a plain
            Transformer). The default's fields are
            :data:`~headwise.intent.training.defaults.DEFAULT_TRANSFORMER_OVERRIDES`; a
            narrower layer gets none.
    """

    NAME: ClassVar[str] = "transformer"
    tokenizer: str = "auto"
    vocab_size: int = 8000
    max_length: int = 64
    d_model: int = 256
    num_layers: int = 2
    num_heads: int = 8
    d_ff: int | None = None
    fusion: str = "concat"
    norm: str = "layernorm"
    position: str = DEFAULT_TRANSFORMER_POSITION
    pooling: str = "mean"
    dropout: float = 0.1
    attention_dropout: float = 0.1
    model_overrides: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.model_overrides is None:
            self.model_overrides = copy.deepcopy(DEFAULT_TRANSFORMER_OVERRIDES) \
                if isinstance(self.num_heads, int) and self.num_heads >= 4 else {}
        _check_scratch(self)
        if min(self.d_model, self.num_layers, self.num_heads) < 1 or self.d_model % self.num_heads:
            raise ValueError(f"architecture.d_model ({self.d_model}) must be a positive "
                             f"multiple of architecture.num_heads ({self.num_heads}), and "
                             f"num_layers ({self.num_layers}) positive")
        for name in ("number_heads", "negation_heads"):
            heads = self.model_overrides.get(name) or []
            if any(not isinstance(h, int) or not 0 <= h < self.num_heads for h in heads):
                raise ValueError(
                    f"architecture.model_overrides.{name} {heads} names heads a layer of "
                    f"{self.num_heads} heads lacks (0 to {self.num_heads - 1}); give heads "
                    f"it has, or architecture.model_overrides without {name} ({{}}: a "
                    f"plain Transformer)")

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return self.NAME


@dataclass
class BiLSTM:
    """The BiLSTM baseline; its fields are :class:`~headwise.models.config.ModelConfig`'s.

    Attributes:
        tokenizer: as the Transformer's.
        vocab_size: as the Transformer's.
        max_length: longest input in tokens.
        lstm_embed_dim: token embedding size.
        lstm_hidden: hidden size of each direction.
        lstm_pooling: how the time steps become one vector (``"max"``, ``"mean"``,
            ``"last"`` or ``"attention"``).
        dropout: dropout of the embeddings and the pooled vector.
        model_overrides: any further ModelConfig fields.
    """

    NAME: ClassVar[str] = "bilstm"
    tokenizer: str = "auto"
    vocab_size: int = 8000
    max_length: int = 64
    lstm_embed_dim: int = 128
    lstm_hidden: int = 128
    lstm_pooling: str = "max"
    dropout: float = 0.1
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_scratch(self)

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return self.NAME


def _check_scratch(part: Transformer | BiLSTM) -> None:
    """The checks of a from-scratch network's part."""
    check_types(part, "architecture")
    check_choice("architecture.tokenizer", part.tokenizer, ("auto", "char", "wordpiece"))
    if part.tokenizer == "char" and part.vocab_size != type(part).vocab_size:
        raise ValueError("architecture.vocab_size is a WordPiece vocabulary's: a character "
                         "vocabulary (tokenizer 'char') takes what it needs; remove one")
    if part.max_length < 2 or not 0.0 <= part.dropout < 1.0:
        raise ValueError(f"architecture.max_length must be >= 2 and architecture.dropout in "
                         f"[0, 1), got {part.max_length}, {part.dropout}")
    own = tuple(f.name for f in dataclasses.fields(part))
    check_overrides("architecture", part.model_overrides, own + ("max_position",))


@dataclass
class PretrainedEncoder:
    """An imported pretrained encoder with a fresh head; its architecture and tokenizer are
    the checkpoint's.

    Attributes:
        name: a BERT, RoBERTa or XLM-R checkpoint directory in Hugging Face layout, a
            headwise model directory, or a name of
            :func:`~headwise.models.catalog.pretrained_path` (``multilingual-e5-small``,
            ``all-minilm-l6-v2``).
        max_length: longest input in tokens, special tokens included.
        input_prefix: text read before every input (e5 was trained with ``"query: "``);
            None: the checkpoint's own (its ``headwise_source.json``), ``""``: none. Saved
            in the classifier's tokenizer, so predict and serve apply it.
        trim_vocab: vocabulary trimming (:mod:`headwise.models.vocab_trim`): ``"auto"``
            trims a vocabulary of more than
            :data:`~headwise.intent.training.trimming.TRIM_ABOVE` ids to the training
            texts' tokens plus the most frequent pieces; a number is that reserve
            (trimming any vocabulary); ``"none"`` keeps every row.
        pre_split: ``"none"``, or a name of :data:`~headwise.text.tokenizer.PRE_SPLITS`
            that the checkpoint's tokenizer cuts the text at before its vocabulary reads
            it (``"cjk_digits"``: each CJK character and each run of digits a piece of its
            own, so that a slot span's edges fall between tokens); saved in the
            classifier's tokenizer.
        model_overrides: further ModelConfig fields of the multi-label joint model
            (``number_heads``, ...; single-label fine-tuning keeps the checkpoint's).
    """

    NAME: ClassVar[str] = "pretrained"
    name: str = ""
    max_length: int = 64
    input_prefix: str | None = None
    trim_vocab: str | int = "auto"
    pre_split: str = "none"
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_types(self, "architecture")
        if not self.name:
            raise ValueError("architecture.name: a pretrained encoder needs its checkpoint "
                             "(a directory or an installable name: --model pretrained:NAME)")
        tv = self.trim_vocab
        if tv not in ("auto", "none") and not (isinstance(tv, int) and tv >= 0):
            raise ValueError(f"architecture.trim_vocab must be auto, none or a reserve >= 0, "
                             f"got {tv!r}")
        if self.pre_split != "none" and self.pre_split not in PRE_SPLITS:
            raise ValueError(f"architecture.pre_split must be none or one of "
                             f"{sorted(PRE_SPLITS)}, got {self.pre_split!r}")
        check_overrides("architecture", self.model_overrides, ("max_position",))

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return f"{self.NAME}:{self.name}"


@dataclass
class Tfidf:
    """TF-IDF n-gram features and a logistic regression
    (:class:`~headwise.intent.tfidf.TfidfClassifier`), no network.

    Attributes:
        c: the inverse L2 strength, or a list of candidates chosen by 5-fold out-of-fold
            macro-F1 (:mod:`headwise.intent.training.tfidf_selection`).
    """

    NAME: ClassVar[str] = "tfidf"
    c: float | list[float] = 10.0

    def __post_init__(self) -> None:
        check_types(self, "architecture")
        check_c("architecture.c", self.c)

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return self.NAME




Architecture = Transformer | BiLSTM | PretrainedEncoder | Tfidf
#: the architectures by the name a recipe file's ``architecture.type`` gives
ARCHITECTURES: dict[str, type] = {c.NAME: c for c in (Transformer, BiLSTM, PretrainedEncoder,
                                                     Tfidf)}


def architecture_from_spec(spec: str) -> Architecture:
    """The default part of ``--model SPEC``: ``transformer``, ``bilstm``, ``tfidf`` or
    ``pretrained:NAME_OR_DIR``.

    Raises:
        ValueError: an unknown architecture (the known ones named).
    """
    name, _, rest = spec.partition(":")
    if name == PretrainedEncoder.NAME:
        return PretrainedEncoder(name=rest)
    if name not in ARCHITECTURES or rest:
        raise ValueError(f"--model must be one of {sorted(set(ARCHITECTURES) - {'pretrained'})} "
                         f"or 'pretrained:NAME_OR_DIR', got {spec!r}")
    return ARCHITECTURES[name]()
