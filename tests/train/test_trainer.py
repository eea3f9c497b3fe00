"""The Trainer end to end on tiny models: learning, accumulation, AdamW, clipping,
early stopping, the metrics log, precision, gradient checkpointing, determinism."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils.data import DataLoader, default_collate
from train_helpers import TinyClassifier, TinyMLP, make_token_data, make_vector_data

from headwise.text.batching import pad_collate
from headwise.train import TrainConfig, Trainer, load_checkpoint
from headwise.train.checkpoint import read_pointer
from headwise.train.distributed import DistContext

TRAIN_FIELDS = {"step", "epoch", "lr", "loss", "grad_norm", "tokens_per_s", "examples_per_s"}


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models train fastest, and least disturbed by other processes, on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config(**overrides) -> TrainConfig:
    base = dict(lr=0.05, batch_size=8, epochs=1, weight_decay=0.0, max_grad_norm=None,
                schedule="constant", log_every=1, progress=False, device="cpu", seed=0)
    base.update(overrides)
    return TrainConfig(**base)


def tiny_classifier(**kw) -> TinyClassifier:
    torch.manual_seed(0)
    return TinyClassifier(**kw)


def tiny_mlp() -> TinyMLP:
    torch.manual_seed(0)
    return TinyMLP()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_training_reduces_loss_and_logs_json_lines(tmp_path: Path):
    model = tiny_classifier()
    data, valid = make_token_data(64, seed=1), make_token_data(24, seed=2)
    trainer = Trainer(model, config(epochs=6, lr=0.03, warmup_steps=4, schedule="linear",
                                    weight_decay=0.01, max_grad_norm=1.0),
                      data, valid_data=valid, collate_fn=pad_collate, out_dir=tmp_path)
    before = trainer.evaluate()["loss"]
    result = trainer.train()
    after = trainer.evaluate()["loss"]
    assert after < 0.6 * before
    assert result.steps == 6 * 8 and result.epochs == 6.0

    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records == result.history
    train = [r for r in records if "loss" in r]
    evals = [r for r in records if "eval_loss" in r]
    assert [r["step"] for r in train] == list(range(1, 49))
    assert all(TRAIN_FIELDS <= r.keys() for r in train)
    assert all(math.isfinite(r[k]) for r in train for k in TRAIN_FIELDS)
    assert train[-1]["loss"] < train[0]["loss"]
    assert [r["step"] for r in evals] == [8, 16, 24, 32, 40, 48]  # eval_every="epoch"
    assert [r["epoch"] for r in evals] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert evals[-1]["eval_loss"] == pytest.approx(after)
    # tokens are the real (unpadded) tokens of each step
    assert train[0]["tokens_per_s"] > train[0]["examples_per_s"] > 0


def test_logged_learning_rate_follows_warmup_then_cosine(tmp_path: Path):
    trainer = Trainer(tiny_mlp(), config(lr=0.1, max_steps=10, warmup_steps=3,
                                         schedule="cosine"),
                      make_vector_data(16, seed=0), out_dir=tmp_path)
    lrs = [r["lr"] for r in trainer.train().history]
    expected = [0.1 * (s + 1) / 3 if s < 3 else 0.1 * 0.5 * (1 + math.cos(math.pi * (s - 3) / 7))
                for s in range(10)]
    assert lrs == pytest.approx(expected, rel=1e-12)


def test_one_step_is_adamw_with_decoupled_decay_and_clipping(tmp_path: Path):
    """Against a hand-written AdamW step, and torch.optim.AdamW as a second reference."""
    lr, wd, b1, b2, eps, clip = 0.1, 0.5, 0.9, 0.99, 1e-8, 0.05
    data = make_vector_data(16, seed=3)
    model = tiny_mlp()
    start = copy.deepcopy(model)
    Trainer(model, config(lr=lr, weight_decay=wd, betas=(b1, b2), eps=eps, batch_size=16,
                          max_steps=1, max_grad_norm=clip, shuffle=False),
            data, out_dir=tmp_path).train()

    ref = copy.deepcopy(start)
    ref(**default_collate(data))["loss"].backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in ref.parameters()]))
    assert norm > clip  # the step is clipped
    expected = {}
    for name, p in ref.named_parameters():
        g = p.grad * (clip / (norm + 1e-6))
        m_hat = (1 - b1) * g / (1 - b1)
        v_hat = (1 - b2) * g * g / (1 - b2)
        decay = wd if p.ndim >= 2 else 0.0  # biases and LayerNorm weights are not decayed
        expected[name] = p.detach() * (1 - lr * decay) - lr * m_hat / (v_hat.sqrt() + eps)
    got = dict(model.named_parameters())
    for name, want in expected.items():
        torch.testing.assert_close(got[name].detach(), want, rtol=1e-5, atol=1e-6)
    # the decay is visible: without it fc1.weight would be elsewhere
    w0 = dict(start.named_parameters())["fc1.weight"].detach()
    assert not torch.allclose(got["fc1.weight"], expected["fc1.weight"] + lr * wd * w0)

    # torch.optim.AdamW with hand-made groups reaches the same weights
    ref2 = copy.deepcopy(start)
    ref2(**default_collate(data))["loss"].backward()
    torch.nn.utils.clip_grad_norm_(ref2.parameters(), clip)
    groups = [{"params": [p for p in ref2.parameters() if p.ndim >= 2], "weight_decay": wd},
              {"params": [p for p in ref2.parameters() if p.ndim < 2], "weight_decay": 0.0}]
    torch.optim.AdamW(groups, lr=lr, betas=(b1, b2), eps=eps).step()
    for (name, p), (_, q) in zip(model.named_parameters(), ref2.named_parameters(),
                                 strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=name)


def test_gradient_clipping_bounds_the_update_norm(tmp_path: Path):
    norms: list[float] = []

    def record(optimizer: torch.optim.Optimizer, *_: object) -> None:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"]]
        norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))

    handle = register_optimizer_step_pre_hook(record)
    try:
        result = Trainer(tiny_mlp(), config(lr=0.5, max_steps=6, max_grad_norm=0.001),
                         make_vector_data(32, seed=4), out_dir=tmp_path).train()
    finally:
        handle.remove()
    assert len(norms) == 6
    assert max(norms) <= 0.001 * (1 + 1e-4)
    assert min(r["grad_norm"] for r in result.history) > 0.001  # logged: before clipping


@pytest.mark.parametrize(("small", "accum", "big"), [(8, 2, 16), (6, 2, 12)])
def test_gradient_accumulation_equals_a_bigger_batch(tmp_path: Path, small, accum, big):
    """32 examples; (6, 2) also has a last, smaller window (6+2 vs 8)."""
    data = make_vector_data(32, seed=5)
    common = dict(lr=0.05, weight_decay=0.1, max_grad_norm=1.0, shuffle=False, epochs=2,
                  warmup_steps=2, schedule="linear")
    a, b = tiny_mlp(), tiny_mlp()
    ra = Trainer(a, config(batch_size=small, grad_accum_steps=accum, **common), data,
                 out_dir=tmp_path / "a").train()
    rb = Trainer(b, config(batch_size=big, **common), data, out_dir=tmp_path / "b").train()
    assert ra.steps == rb.steps == 2 * math.ceil(32 / big)
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)
    assert [r["loss"] for r in ra.history] == pytest.approx([r["loss"] for r in rb.history])


def test_early_stopping_stops_after_patience_and_keeps_the_best(tmp_path: Path):
    scores = iter([0.5, 0.7, 0.6, 0.65, 0.7, 0.99])  # best at eval 2; 3 evals no better
    seen_modes = []

    def evaluate(model: torch.nn.Module, loader: DataLoader) -> dict[str, float]:
        seen_modes.append(model.training)
        assert isinstance(loader, DataLoader)
        return {"macro_f1": next(scores), "other": 1.0}

    data = make_vector_data(32, seed=6)
    model = tiny_mlp()
    result = Trainer(model, config(max_steps=20, eval_every=1, patience=3,
                                   early_stopping_metric="macro_f1", early_stopping_mode="max",
                                   keep_checkpoints=1),
                     data, valid_data=data[:8], evaluate_fn=evaluate,
                     out_dir=tmp_path).train()
    assert result.stopped_early and result.steps == 5
    assert seen_modes == [False] * 5 and model.training
    assert result.best_metric == 0.7 and result.best_step == 2
    assert result.best_checkpoint == tmp_path / "step-000002"
    assert read_pointer(tmp_path / "best") == result.best_checkpoint
    # keep_checkpoints=1 keeps the newest one and, always, the best
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000002", "step-000005"]
    evals = [r for r in result.history if "eval_macro_f1" in r]
    assert [r["is_best"] for r in evals] == [True, True, False, False, False]

    # the best checkpoint holds the weights after step 2
    two = tiny_mlp()
    Trainer(two, config(max_steps=2), data, out_dir=tmp_path / "two").train()
    best = load_checkpoint(result.best_checkpoint).model_state
    assert all(torch.equal(best[k], v) for k, v in two.state_dict().items())

    # resuming an early-stopped run does not train further
    again = Trainer(tiny_mlp(), config(max_steps=20, eval_every=1, patience=3,
                                       early_stopping_metric="macro_f1",
                                       early_stopping_mode="max", keep_checkpoints=1),
                    data, valid_data=data[:8], evaluate_fn=evaluate, out_dir=tmp_path)
    assert again.train(resume=True).steps == 5


def test_missing_early_stopping_metric_is_a_clear_error(tmp_path: Path):
    data = make_vector_data(16, seed=0)
    trainer = Trainer(tiny_mlp(), config(max_steps=2, eval_every=1,
                                         early_stopping_metric="macro_f1"),
                      data, valid_data=data, out_dir=tmp_path)
    with pytest.raises(KeyError, match="macro_f1.*loss"):
        trainer.train()


def test_same_seed_gives_bit_identical_weights(tmp_path: Path):
    data = make_token_data(40, seed=7)
    runs = []
    for name in ("a", "b"):
        model = tiny_classifier(dropout=0.2)
        Trainer(model, config(epochs=2, batch_size=4, weight_decay=0.01, max_grad_norm=1.0),
                data, collate_fn=pad_collate, out_dir=tmp_path / name).train()
        runs.append(model.state_dict())
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])


def test_resume_continues_and_fresh_start_refuses_a_used_directory(tmp_path: Path):
    data = make_token_data(24, seed=8)
    cfg = config(epochs=2, batch_size=4, checkpoint_every=4, keep_checkpoints=None)
    straight = tiny_classifier(dropout=0.1)
    Trainer(straight, cfg, data, collate_fn=pad_collate, out_dir=tmp_path / "a").train()

    # the same run, crashed by an exception in its 7th step, then resumed in a new Trainer
    crashing = tiny_classifier(dropout=0.1)
    calls = [0]

    def crash(module: torch.nn.Module, _inputs: object) -> None:
        calls[0] += 1
        if calls[0] == 7:
            raise RuntimeError("simulated crash")

    handle = crashing.register_forward_pre_hook(crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        Trainer(crashing, cfg, data, collate_fn=pad_collate, out_dir=tmp_path / "b").train()
    handle.remove()
    with pytest.raises(FileExistsError, match="resume=True"):
        Trainer(tiny_classifier(), cfg, data, collate_fn=pad_collate,
                out_dir=tmp_path / "b").train()
    resumed = tiny_classifier(dropout=0.1)
    result = Trainer(resumed, cfg, data, collate_fn=pad_collate,
                     out_dir=tmp_path / "b").train(resume=True)
    assert result.steps == 12
    assert all(torch.equal(v, resumed.state_dict()[k]) for k, v in straight.state_dict().items())
    # a changed data order cannot be continued
    with pytest.raises(ValueError, match="seed"):
        Trainer(tiny_classifier(), config(epochs=3, batch_size=4, seed=1), data,
                collate_fn=pad_collate, out_dir=tmp_path / "b").train(resume=True)


def test_bf16_on_cpu_when_asked(tmp_path: Path):
    model = tiny_classifier()
    dtypes = []
    model.head.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    result = Trainer(model, config(precision="bf16", max_steps=3, batch_size=4),
                     make_token_data(12, seed=9), collate_fn=pad_collate,
                     out_dir=tmp_path).train()
    assert dtypes and all(d == torch.bfloat16 for d in dtypes)  # autocast was on
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights
    assert all(math.isfinite(r["loss"]) for r in result.history)


@pytest.mark.parametrize("chosen", ["fp32", "bf16"])
def test_auto_precision_on_cpu_runs_what_the_machine_choice_says(tmp_path: Path, monkeypatch,
                                                                 chosen: str):
    from headwise.train import precision as precision_module

    monkeypatch.setattr(precision_module, "auto_cpu_precision",
                        lambda: precision_module.PrecisionChoice(chosen, "injected"))
    model = tiny_classifier()
    dtypes = []
    model.head.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    trainer = Trainer(model, config(precision="auto", max_steps=1, batch_size=4),
                      make_token_data(4, seed=9), collate_fn=pad_collate, out_dir=tmp_path)
    assert (trainer.precision.precision, trainer.precision.reason) == (chosen, "injected")
    trainer.train()
    assert dtypes == [torch.bfloat16 if chosen == "bf16" else torch.float32]
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_fp16_on_cpu_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        Trainer(tiny_mlp(), config(precision="fp16"), make_vector_data(4, seed=0),
                out_dir=tmp_path)


def test_gradient_checkpointing_is_switched_on_and_changes_nothing(tmp_path: Path):
    data = make_token_data(16, seed=10)
    plain, ckpt = tiny_classifier(), tiny_classifier()
    Trainer(plain, config(max_steps=3, batch_size=4), data, collate_fn=pad_collate,
            out_dir=tmp_path / "a").train()
    Trainer(ckpt, config(max_steps=3, batch_size=4, gradient_checkpointing=True), data,
            collate_fn=pad_collate, out_dir=tmp_path / "b").train()
    assert ckpt.checkpointing and not plain.checkpointing
    for p, q in zip(plain.parameters(), ckpt.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    with pytest.raises(TypeError, match="set_gradient_checkpointing"):
        Trainer(tiny_mlp(), config(gradient_checkpointing=True), make_vector_data(4, seed=0),
                out_dir=tmp_path / "c")


def test_bad_inputs_are_clear_errors(tmp_path: Path):
    data = make_vector_data(8, seed=0)
    with pytest.raises(ValueError, match="empty"):
        Trainer(tiny_mlp(), config(), [], out_dir=tmp_path)
    with pytest.raises(ValueError, match="divisible"):
        Trainer(tiny_mlp(), config(batch_size=4), data, out_dir=tmp_path)._train(
            DistContext(world_size=3), False)

    class NoDict(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2, 2))

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return self.w.sum() * x.sum()

    with pytest.raises(TypeError, match="'loss'"):
        Trainer(NoDict(), config(max_steps=1), data, out_dir=tmp_path / "n").train()


def test_frozen_parameters_are_not_trained(tmp_path: Path):
    model = tiny_mlp()
    model.fc1.requires_grad_(False)
    before = model.fc1.weight.detach().clone()
    Trainer(model, config(max_steps=2, weight_decay=0.5), make_vector_data(8, seed=0),
            out_dir=tmp_path).train()
    assert torch.equal(model.fc1.weight, before)
    assert not torch.equal(model.fc2.weight, tiny_mlp().fc2.weight)


def test_the_optimizer_is_fused_adamw_on_the_cpu_and_not_off_its_devices():
    from headwise.train import build_optimizer

    opt = build_optimizer(tiny_classifier(), lr=0.1, weight_decay=0.01, betas=(0.9, 0.999),
                          eps=1e-8)
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["fused"] is True
    meta = torch.nn.Linear(3, 2, device="meta")  # a device without torch's fused kernel
    opt = build_optimizer(meta, lr=0.1, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8)
    assert not opt.defaults["fused"]
