"""Encoder-decoder Transformer (Vaswani et al. 2017) with cross-attention and generation.

``EncoderDecoder(config)`` is the model of "Attention Is All You Need": a
:class:`~headwise.models.encoder.TransformerEncoder` of ``num_layers`` layers reads the
source; a :class:`TransformerDecoder` of ``num_decoder_layers`` layers (causal
self-attention, cross-attention to the encoder output, feed-forward) predicts the target
one token at a time. :meth:`EncoderDecoder.generate` decodes greedily or by beam search
(:mod:`headwise.models.generation`), with per-layer KV caches (:class:`DecoderState`) or,
for comparison, recomputing the whole prefix at every step.

Vocabulary: by default source and target share one vocabulary (one tokenizer, as in the
paper's shared BPE vocabulary), so encoder and decoder share one token embedding table,
and with ``tie_embeddings`` the output projection is that table too (three-way tying).
A separate target vocabulary is requested with ``config.extra["target_vocab_size"]``;
then the decoder has its own embeddings (tied to the output projection when
``tie_embeddings``). The special tokens (pad, BOS, EOS) are the config's, in both.

Padding: source and target batches are padded on the right (absolute positions start at
the first token); ``attention_mask`` / ``decoder_attention_mask`` mark real tokens.
``config.attention_pattern`` (a sparse pattern) applies to the encoder only; the decoder's
self-attention is causal and its cross-attention sees every real source token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.attention import KVCache
from headwise.attention import masks as M
from headwise.models.config import ModelConfig
from headwise.models.encoder import TransformerEncoder, stack_parts
from headwise.models.generation import (
    ReorderFn,
    StepFn,
    beam_search,
    check_generation_args,
    greedy_search,
)
from headwise.models.hub import PretrainedMixin
from headwise.models.registry import register_model
from headwise.nn import DecoderLayer, build_norm, maybe_checkpoint

#: label value ignored by the loss (padding of the target batch)
IGNORE_INDEX = -100


class DecoderState:
    """The KV caches of an incremental decoder: per layer, one for self-attention (the
    target tokens so far) and one for the projected encoder output (filled on first use).

    Args:
        self_caches: one self-attention KVCache per decoder layer.
        memory_caches: one cross-attention KVCache per decoder layer.

    Raises:
        ValueError: lists of different lengths, or empty.
    """

    def __init__(self, self_caches: list[KVCache], memory_caches: list[KVCache]) -> None:
        if not self_caches or len(self_caches) != len(memory_caches):
            raise ValueError(f"need one self and one memory cache per layer, got "
                             f"{len(self_caches)} and {len(memory_caches)}")
        self.self_caches, self.memory_caches = list(self_caches), list(memory_caches)

    @property
    def length(self) -> int:
        """Target tokens decoded so far (the position of the next one)."""
        return self.self_caches[0].length

    def reorder(self, index: Tensor, *, memory: bool = True) -> None:
        """Keep batch rows ``index`` (beam search): ``row i <- row index[i]``.

        Args:
            index: (rows,) long tensor.
            memory: also reorder the memory caches; beam search passes False, since the
                beams of one source row share one encoder output.
        """
        for cache in self.self_caches + (self.memory_caches if memory else []):
            cache.reorder(index)

    def reset(self) -> None:
        """Forget every token and the stored encoder output (the buffers are kept)."""
        for cache in self.self_caches + self.memory_caches:
            cache.reset()


class TransformerDecoder(nn.Module):
    """Target embeddings, ``num_decoder_layers`` decoder layers, a final norm (pre-norm).

    Args:
        config: the model config (widths, norms, positions as the encoder's).
        vocab_size: target vocabulary size.
    """

    def __init__(self, config: ModelConfig, vocab_size: int) -> None:
        super().__init__()
        c = config
        self.embeddings, layer = stack_parts(c, vocab_size, type_vocab_size=0)
        self.layers = nn.ModuleList(DecoderLayer(c.d_model, c.num_heads, c.d_ff, **layer)
                                    for _ in range(c.num_decoder_layers))
        self.final_norm = build_norm(c.norm, c.d_model, c.norm_eps) if c.norm_first else None
        self.gradient_checkpointing = False

    def init_state(self, batch_size: int, max_len: int, memory: Tensor) -> DecoderState:
        """Empty caches for ``batch_size`` rows of up to ``max_len`` target tokens.

        The caches take ``memory``'s device and dtype, or the autocast dtype when autocast
        is on for that device (the projections then produce keys in that dtype).
        """
        dtype, device = memory.dtype, memory.device
        if torch.is_autocast_enabled(device.type):
            dtype = torch.get_autocast_dtype(device.type)
        selfs, mems = [], []
        for layer in self.layers:
            sa, ca = layer.self_attn, layer.cross_attn
            selfs.append(KVCache(batch_size, max_len, sa.num_kv_heads, sa.head_dim,
                                 dtype=dtype, device=device))
            mems.append(KVCache(batch_size, max(1, memory.shape[1]), ca.num_kv_heads,
                                ca.head_dim, dtype=dtype, device=device))
        return DecoderState(selfs, mems)

    def forward(self, input_ids: Tensor, memory: Tensor,
                self_mask: M.AttentionPattern | Tensor | None = None,
                memory_mask: Tensor | None = None,
                state: DecoderState | None = None) -> Tensor:
        """Decoder hidden states (batch, tgt, d_model) of ``input_ids`` (batch, tgt).

        Args:
            input_ids: target tokens; with a ``state``, only those it has not seen.
            memory: encoder output (batch, src, d_model).
            self_mask: self-attention mask (e.g. ``masks.causal()``); with a ``state``
                causality is implied and this stays None.
            memory_mask: boolean (batch, 1, 1, src), True = real source token.
            state: KV caches for incremental decoding; positions continue from
                ``state.length``.
        """
        offset = 0 if state is None else state.length
        x = self.embeddings(input_ids, offset=offset)
        for i, layer in enumerate(self.layers):
            if state is None:
                x = maybe_checkpoint(self.gradient_checkpointing and self.training, layer, x,
                                     memory, self_mask, memory_mask)
            else:
                x = layer(x, memory, self_mask, memory_mask,
                          self_cache=state.self_caches[i], memory_cache=state.memory_caches[i])
        return self.final_norm(x) if self.final_norm is not None else x


class EncoderDecoder(PretrainedMixin, nn.Module):
    """A Transformer encoder-decoder for sequence-to-sequence tasks (translation).

    ``forward`` trains it by teacher forcing and returns ``{"logits": (batch, tgt,
    vocab)}`` plus ``"loss"`` (token-level cross-entropy) when labels are given — the
    contract the Trainer trains. ``generate`` decodes new sequences.

    Args:
        config: a ``"seq2seq"`` config; ``num_layers`` encoder and ``num_decoder_layers``
            decoder layers. ``config.extra["target_vocab_size"]`` gives the decoder its
            own vocabulary (default: the shared ``vocab_size``; module docstring).

    Raises:
        ValueError: another model type, no decoder layers, or ALiBi positions.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.model_type != "seq2seq":
            raise ValueError(f"EncoderDecoder needs model_type='seq2seq', got "
                             f"{config.model_type!r}")
        if config.num_decoder_layers < 1:
            raise ValueError(f"num_decoder_layers must be >= 1, got "
                             f"{config.num_decoder_layers}")
        if config.position == "alibi":
            raise ValueError("position='alibi' is for encoder models: the decoder's cached "
                             "self-attention does not add it; use 'rope' or 'sinusoidal'")
        if config.conv_kernel:
            raise ValueError("conv_kernel is for encoder models: the decoder's cached "
                             "self-attention reads one new token a step, without its "
                             "neighbours")
        self.config = config
        self.shared_vocabulary = "target_vocab_size" not in config.extra
        self.target_vocab_size = int(config.extra.get("target_vocab_size", config.vocab_size))
        self.encoder = TransformerEncoder(config)
        self.decoder = TransformerDecoder(config, self.target_vocab_size)
        if self.shared_vocabulary:
            self.decoder.embeddings.word_embeddings = self.encoder.embeddings.word_embeddings
        self.output_projection = nn.Linear(config.d_model, self.target_vocab_size, bias=False)
        if config.tie_embeddings:
            self.output_projection.weight = self.decoder.embeddings.word_embeddings.weight
        else:
            nn.init.normal_(self.output_projection.weight, std=0.02)

    # ------------------------------------------------------------------------------
    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Encoder output ("memory") (batch, src, d_model) of ``input_ids`` (batch, src);
        ``attention_mask`` (batch, src) is 1 for real tokens, 0 for padding."""
        return self.encoder(input_ids, attention_mask)

    @staticmethod
    def memory_mask(attention_mask: Tensor | None, src_len: int) -> Tensor | None:
        """The cross-attention mask (batch, 1, 1, src) of a source ``attention_mask``, or
        None when there is no padding."""
        if attention_mask is None:
            return None
        if attention_mask.ndim != 2 or attention_mask.shape[1] != src_len:
            raise ValueError(f"attention_mask must be (batch, {src_len}), got "
                             f"{tuple(attention_mask.shape)}")
        keep = attention_mask.bool()
        return None if bool(keep.all()) else keep[:, None, None, :]

    def decode(self, decoder_input_ids: Tensor, memory: Tensor,
               attention_mask: Tensor | None = None,
               decoder_attention_mask: Tensor | None = None) -> Tensor:
        """Teacher-forced logits (batch, tgt, vocab): every target position at once.

        Args:
            decoder_input_ids: (batch, tgt), starting with BOS.
            memory: :meth:`encode`'s output.
            attention_mask: the source padding mask (batch, src).
            decoder_attention_mask: (batch, tgt), 1 for real target tokens.
        """
        if decoder_input_ids.ndim != 2 or decoder_input_ids.shape[0] != memory.shape[0]:
            raise ValueError(f"decoder_input_ids must be (batch={memory.shape[0]}, tgt), got "
                             f"{tuple(decoder_input_ids.shape)}")
        self_mask = M.causal()
        if decoder_attention_mask is not None:
            if decoder_attention_mask.shape != decoder_input_ids.shape:
                raise ValueError(f"decoder_attention_mask must be "
                                 f"{tuple(decoder_input_ids.shape)}, got "
                                 f"{tuple(decoder_attention_mask.shape)}")
            keep = decoder_attention_mask.bool()
            if not bool(keep.all()):
                self_mask = self_mask & M.key_padding(keep)
        mem_mask = self.memory_mask(attention_mask, memory.shape[1])
        return self.output_projection(self.decoder(decoder_input_ids, memory, self_mask,
                                                   mem_mask))

    def init_state(self, batch_size: int, max_len: int, memory: Tensor) -> DecoderState:
        """Empty per-layer caches for :meth:`decode_step` (up to ``max_len`` tokens)."""
        return self.decoder.init_state(batch_size, max_len, memory)

    def decode_step(self, decoder_input_ids: Tensor, memory: Tensor, state: DecoderState,
                    attention_mask: Tensor | None = None) -> Tensor:
        """Incremental decoding: logits (batch, t, vocab) of the ``t`` new target tokens
        ``decoder_input_ids`` (batch, t), continuing after the ``state.length`` tokens the
        caches hold (and appending these). Pass the same ``memory`` at every step."""
        if decoder_input_ids.ndim != 2 or decoder_input_ids.shape[0] != memory.shape[0]:
            raise ValueError(f"decoder_input_ids must be (batch={memory.shape[0]}, t), got "
                             f"{tuple(decoder_input_ids.shape)}")
        mem_mask = self.memory_mask(attention_mask, memory.shape[1])
        return self.output_projection(self.decoder(decoder_input_ids, memory, None, mem_mask,
                                                   state))

    def shift_right(self, labels: Tensor) -> Tensor:
        """Decoder inputs for teacher forcing: BOS, then the labels but the last; ignored
        labels (-100) become pad tokens."""
        dec = labels.new_full(labels.shape, self.config.pad_token_id)
        dec[:, 0] = self.config.bos_token_id
        dec[:, 1:] = labels[:, :-1]
        return dec.masked_fill(dec == IGNORE_INDEX, self.config.pad_token_id)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                decoder_input_ids: Tensor | None = None,
                decoder_attention_mask: Tensor | None = None, labels: Tensor | None = None,
                label_smoothing: float = 0.0) -> dict[str, Tensor]:
        """Teacher-forced logits, and the loss when ``labels`` are given.

        Args:
            input_ids: source tokens (batch, src); ``attention_mask`` marks real ones.
            decoder_input_ids: (batch, tgt) starting with BOS; default
                :meth:`shift_right` of ``labels``.
            decoder_attention_mask: (batch, tgt), 1 for real target tokens.
            labels: (batch, tgt) the tokens to predict (ending with EOS), -100 where
                ignored (padding).
            label_smoothing: in [0, 1), as in ``F.cross_entropy``.

        Returns:
            ``{"logits": (batch, tgt, vocab)}`` and ``"loss"``: the mean token
            cross-entropy over labels that are not -100.

        Raises:
            ValueError: neither decoder inputs nor labels, mismatched shapes, or a bad
                ``label_smoothing``.
        """
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("pass decoder_input_ids or labels (shifted right with BOS)")
            decoder_input_ids = self.shift_right(labels)
        if labels is not None and labels.shape != decoder_input_ids.shape:
            raise ValueError(f"labels {tuple(labels.shape)} and decoder_input_ids "
                             f"{tuple(decoder_input_ids.shape)} must have one shape")
        memory = self.encode(input_ids, attention_mask)
        logits = self.decode(decoder_input_ids, memory, attention_mask, decoder_attention_mask)
        out = {"logits": logits}
        if labels is not None:
            flat = logits.reshape(-1, logits.shape[-1])
            flat = flat if flat.dtype == torch.float64 else flat.float()
            out["loss"] = F.cross_entropy(flat, labels.reshape(-1), ignore_index=IGNORE_INDEX,
                                          label_smoothing=label_smoothing)
        return out

    # ------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                 max_new_tokens: int = 64, num_beams: int = 1, length_penalty: float = 1.0,
                 early_stopping: bool = True, use_cache: bool = True,
                 min_new_tokens: int = 0) -> Tensor:
        """Decode target sequences: greedy (``num_beams == 1``) or beam search.

        Runs in eval mode (the previous mode is restored) under ``torch.inference_mode``.
        The source is encoded once; with ``use_cache`` each step feeds one token through
        the decoder and its per-layer KV caches (constant work per token); without, each
        step recomputes the decoder over the whole prefix (work growing with the length).
        Both give the same tokens.

        Args:
            input_ids: source tokens (batch, src), right-padded.
            attention_mask: (batch, src), 1 for real tokens.
            max_new_tokens: at most this many tokens per row (EOS included).
            num_beams: 1 for greedy search, more for beam search. (A single beam with a
                positive ``length_penalty`` may search past the first EOS for a longer
                hypothesis, so greedy is what ``num_beams=1`` runs.)
            length_penalty: beam scores are ``sum_logprob / length ** length_penalty``.
            early_stopping: stop a beam row once ``num_beams`` hypotheses are finished
                and no live beam can beat them (never changes the result); False runs
                to ``max_new_tokens``.
            use_cache: KV caches (True) or full recomputation (False).
            min_new_tokens: EOS is forbidden before this many tokens.

        Returns:
            (batch, out_len) token ids without the BOS, pad tokens after each EOS;
            ``out_len`` <= ``max_new_tokens``.

        Raises:
            TypeError, ValueError: bad arguments (see
                :func:`~headwise.models.generation.check_generation_args`), a source that
                is not (batch, src) integer ids, or more tokens than learned positions.
        """
        check_generation_args(max_new_tokens, num_beams, min_new_tokens, length_penalty,
                              early_stopping, use_cache)
        if not isinstance(input_ids, Tensor) or input_ids.ndim != 2 or input_ids.numel() == 0 \
                or input_ids.is_floating_point():
            raise ValueError(f"input_ids must be a non-empty (batch, src) tensor of token "
                             f"ids, got {getattr(input_ids, 'shape', type(input_ids))}")
        c = self.config
        if c.position == "learned" and max_new_tokens > c.max_position:
            raise ValueError(f"max_new_tokens={max_new_tokens} exceeds the "
                             f"{c.max_position} learned decoder positions")
        was_training = self.training
        self.eval()
        try:
            batch = input_ids.shape[0]
            memory = self.encode(input_ids, attention_mask)
            mem_mask = self.memory_mask(attention_mask, input_ids.shape[1])
            if num_beams > 1:
                memory = memory.repeat_interleave(num_beams, dim=0)
                mem_mask = None if mem_mask is None else mem_mask.repeat_interleave(
                    num_beams, dim=0)
            step, reorder = self._search_functions(memory, mem_mask, use_cache, max_new_tokens)
            special = dict(bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id,
                           pad_token_id=c.pad_token_id, max_new_tokens=max_new_tokens,
                           min_new_tokens=min_new_tokens, device=input_ids.device)
            if num_beams == 1:
                return greedy_search(step, batch, **special)
            return beam_search(step, reorder, batch, num_beams, length_penalty=length_penalty,
                               early_stopping=early_stopping, **special)
        finally:
            self.train(was_training)

    def _search_functions(self, memory: Tensor, mem_mask: Tensor | None, use_cache: bool,
                          max_len: int) -> tuple[StepFn, ReorderFn]:
        """The step and reorder functions of :mod:`headwise.models.generation`."""
        project = self.output_projection
        if not use_cache:
            causal = M.causal()

            def full_step(tokens: Tensor) -> Tensor:
                return project(self.decoder(tokens, memory, causal, mem_mask)[:, -1])

            return full_step, lambda index: None
        state = self.init_state(memory.shape[0], max_len, memory)

        def cached_step(tokens: Tensor) -> Tensor:
            new = tokens[:, state.length:]
            return project(self.decoder(new, memory, None, mem_mask, state)[:, -1])

        return cached_step, lambda index: state.reorder(index, memory=False)

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute each encoder and decoder layer's activations in the backward pass."""
        self.encoder.gradient_checkpointing = bool(enabled)
        self.decoder.gradient_checkpointing = bool(enabled)


register_model("seq2seq", EncoderDecoder)
