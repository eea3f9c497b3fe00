"""Mixed precision: ``auto``'s choice on the CPU (flags and probe injected, so the tests hold
on a machine with or without BF16 instructions), the numerics of bf16 autocast against
fp32, and fp32 weights whatever the run's precision."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from train_helpers import make_token_data

from headwise.intent.training.losses import SmoothedClassification
from headwise.models import EncoderClassifier, ModelConfig
from headwise.nn.norm import LayerNorm, RMSNorm
from headwise.text.batching import pad_collate
from headwise.train import TrainConfig, Trainer, load_checkpoint
from headwise.train import precision as precision_module
from headwise.train.precision import (
    MIN_BF16_SPEEDUP,
    MixedPrecision,
    PrecisionChoice,
    auto_cpu_precision,
    bf16_probe_speedup,
    choose_cpu_precision,
    cpu_flags,
    native_bf16_flags,
    resolve_precision,
)

CPU = torch.device("cpu")


def _never() -> float:
    raise AssertionError("the probe must not run without BF16 flags")


@pytest.mark.parametrize("flags", [set(), {"avx2", "avx512f", "fma"}])
def test_no_native_bf16_is_fp32_without_probing(flags):
    choice = choose_cpu_precision(flags, _never)
    assert choice.precision == "fp32"
    assert "no native BF16" in choice.reason and "avx512_bf16" in choice.reason


def test_native_bf16_flags_names_the_bf16_instructions_among_the_flags():
    assert native_bf16_flags({"avx2", "fma"}) == []
    assert native_bf16_flags(["amx_bf16", "avx512f", "avx512_bf16"]) == ["avx512_bf16",
                                                                          "amx_bf16"]
    assert native_bf16_flags() == native_bf16_flags(cpu_flags())  # default: this CPU


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_native_bf16_that_the_probe_finds_faster_is_bf16(flag):
    choice = choose_cpu_precision({"avx512f", flag}, lambda: 2.5)
    assert choice.precision == "bf16"
    assert flag in choice.reason and "2.5x" in choice.reason


@pytest.mark.parametrize("speedup", [0.05, 1.0, MIN_BF16_SPEEDUP - 1e-3])
def test_native_bf16_that_the_probe_finds_no_faster_is_fp32(speedup):
    # e.g. a CPU whose bf16 matmuls are slower than its fp32 ones
    choice = choose_cpu_precision({"avx512_bf16", "amx_bf16"}, lambda: speedup)
    assert choice.precision == "fp32"
    assert "avx512_bf16, amx_bf16" in choice.reason and f"{speedup:.2f}x" in choice.reason


def test_the_speedup_threshold_itself_takes_bf16():
    assert choose_cpu_precision({"amx_bf16"}, lambda: MIN_BF16_SPEEDUP).precision == "bf16"


def test_cpu_flags_reads_the_flags_line(tmp_path: Path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse avx512f "
                    "avx512_bf16\nbugs\t\t: spectre\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(info) == {"fpu", "sse", "avx512f", "avx512_bf16"}
    assert cpu_flags(tmp_path / "missing") == frozenset()
    (tmp_path / "empty").write_text("processor : 0\n")
    assert cpu_flags(tmp_path / "empty") == frozenset()


def test_the_probe_measures_a_ratio_and_leaves_the_random_state():
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # not one (the suite's count here), so its return shows
    try:
        _probe_leaves_the_state()
    finally:
        torch.set_num_threads(before)


def _probe_leaves_the_state() -> None:
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    seen: list[int] = []
    real = torch.autocast

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    torch.autocast = spy
    try:
        speedup = bf16_probe_speedup(tokens=8, dim=16, hidden=32, repeats=1)
    finally:
        torch.autocast = real
    assert math.isfinite(speedup) and speedup > 0
    assert seen and set(seen) == {1}  # on one thread
    assert torch.equal(torch.get_rng_state(), state) and torch.get_num_threads() == threads


def test_auto_on_this_cpu_is_decided_once_and_follows_the_rule():
    # auto_cpu_precision as imported: the real one (tests/conftest.py pins what
    # resolve_precision sees to fp32 in every other test)
    first = auto_cpu_precision()
    assert auto_cpu_precision() is first  # once per process
    assert first.precision in ("fp32", "bf16") and first.reason.startswith("auto: ")
    native = bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})
    if not native:  # without the instructions bf16 is never taken
        assert first.precision == "fp32"


def test_explicit_precisions_and_errors():
    assert resolve_precision("bf16", CPU) == PrecisionChoice("bf16", "bf16, as configured")
    assert resolve_precision("fp32", CPU).precision == "fp32"
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        resolve_precision("fp16", CPU)
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp8", CPU)


def test_mixed_precision_takes_the_injected_auto_choice(monkeypatch):
    monkeypatch.setattr(precision_module, "auto_cpu_precision",
                        lambda: PrecisionChoice("bf16", "injected"))
    amp = MixedPrecision("auto", CPU)
    assert (amp.precision, amp.reason, amp.dtype) == ("bf16", "injected", torch.bfloat16)
    with amp.autocast():
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert torch.is_autocast_enabled("cpu")


def _encoder(norm: str = "layernorm") -> EncoderClassifier:
    torch.manual_seed(0)
    return EncoderClassifier(ModelConfig(vocab_size=64, d_model=32, num_layers=2, num_heads=4,
                                         d_ff=64, num_labels=5, dropout=0.0, norm=norm))


def _batch() -> dict[str, torch.Tensor]:
    rows = make_token_data(12, seed=3)
    batch = pad_collate([{"input_ids": r["input_ids"], "labels": r["labels"]} for r in rows])
    return batch


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_bf16_forward_is_within_bf16_tolerance_of_fp32_and_keeps_norms_and_loss_fp32(norm):
    model = _encoder(norm).eval()
    batch = _batch()
    with torch.no_grad():
        ref = model(**batch)
        norm_out: list[torch.dtype] = []
        linear_out: list[torch.dtype] = []
        for m in model.modules():
            if isinstance(m, LayerNorm | RMSNorm):
                m.register_forward_hook(lambda _m, _i, out: norm_out.append(out.dtype))
            elif isinstance(m, torch.nn.Linear):
                m.register_forward_hook(lambda _m, _i, out: linear_out.append(out.dtype))
        with MixedPrecision("bf16", CPU).autocast():
            got = model(**batch)
    assert linear_out and set(linear_out) == {torch.bfloat16}  # autocast was on
    assert norm_out and set(norm_out) == {torch.float32}  # the residual stream stays fp32
    assert got["loss"].dtype == torch.float32
    # bf16 keeps 8 significant bits: a few roundings of ~2**-8 through two layers
    scale = ref["logits"].abs().max()
    err = (got["logits"].float() - ref["logits"]).abs().max()
    assert err <= 0.05 * scale, (float(err), float(scale))
    assert abs(float(got["loss"]) - float(ref["loss"])) <= 0.02 * float(ref["loss"])


def test_the_norms_compute_their_statistics_in_fp32_under_autocast():
    torch.manual_seed(1)
    x = (torch.randn(4, 7, 32) * 3 + 5).bfloat16()  # an offset mean: bf16 statistics drift
    for layer, ref in ((LayerNorm(32), lambda v: torch.nn.functional.layer_norm(v, (32,))),
                       (RMSNorm(32), lambda v: v * torch.rsqrt(v.pow(2).mean(-1, True) + 1e-6))):
        with MixedPrecision("bf16", CPU).autocast():
            got = layer(x)
        want = ref(x.double()).to(torch.bfloat16)  # exact statistics, then one rounding
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want.float(), rtol=2 ** -7, atol=2 ** -7)


def test_a_bf16_run_saves_fp32_weights_and_trains(tmp_path: Path):
    torch.manual_seed(0)
    model = SmoothedClassification(_encoder(), 0.0, None, None, 0.0)
    rows = [{"input_ids": r["input_ids"], "labels": r["labels"]}
            for r in make_token_data(24, seed=5)]
    config = TrainConfig(lr=3e-3, batch_size=8, epochs=2, progress=False, device="cpu",
                         precision="bf16", log_every=1)
    trainer = Trainer(model, config, rows, collate_fn=pad_collate, out_dir=tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = trainer.train()
    ckpt = load_checkpoint(result.last_checkpoint)
    assert ckpt.model_state and all(v.dtype == torch.float32 for k, v in
                                    ckpt.model_state.items() if v.is_floating_point())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(math.isfinite(r["loss"]) for r in result.history)
