"""Checkpoints: exact round trips without pickle, atomic writes, refusal of foreign files."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from train_helpers import TinyMLP

from headwise.train import checkpoint as ck
from headwise.train.checkpoint import (
    CheckpointError,
    clean_temporaries,
    find_latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_model_weights,
    prune_checkpoints,
    read_pointer,
    save_checkpoint,
)
from headwise.train.rng import host_rng_states, set_host_rng_states
from headwise.train.serialize import flatten_state, unflatten_state


def trained_mlp_and_optimizer() -> tuple[nn.Module, torch.optim.AdamW]:
    torch.manual_seed(0)
    model = TinyMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, betas=(0.8, 0.95))
    for _ in range(2):
        model(torch.randn(4, 6), torch.tensor([0, 1, 2, 0]))["loss"].backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def test_nested_state_round_trips_exactly():
    t = torch.randn(3)
    state = {"a": 1, "b": [1.5, float("inf"), None, True, "s"], "c": (1, (2, t)),
             3: {"x": t}, "__tensor__": torch.arange(4, dtype=torch.int16)}
    tree, tensors = flatten_state(state, "p")
    json.dumps(tree)
    assert len(tensors) == 2  # `t` is stored once
    back = unflatten_state(json.loads(json.dumps(tree)), tensors)
    assert back.keys() == state.keys()
    assert back["c"][0] == 1 and isinstance(back["c"], tuple) and isinstance(back["c"][1], tuple)
    assert torch.equal(back["c"][1][1], t) and torch.equal(back[3]["x"], t)
    assert back["b"][0] == 1.5 and math.isinf(back["b"][1])
    assert back["b"][2:] == [None, True, "s"]
    assert back["__tensor__"].dtype == torch.int16
    with pytest.raises(TypeError, match="dtype"):
        flatten_state({"d": torch.float32}, "p")


def test_model_optimizer_and_rng_round_trip(tmp_path: Path):
    model, opt = trained_mlp_and_optimizer()
    cpu_rng, host = torch.get_rng_state(), host_rng_states()
    path = save_checkpoint(tmp_path, 7, model.state_dict(),
                           {"optimizer": opt.state_dict(), "host": host, "cpu_rng": cpu_rng})
    assert path == tmp_path / "step-000007"
    assert sorted(p.name for p in path.iterdir()) == sorted(ck.FILES)
    loaded = load_checkpoint(path)
    assert loaded.step == 7

    torch.manual_seed(1)
    fresh = TinyMLP()
    fresh.load_state_dict(loaded.model_state)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.1, betas=(0.8, 0.95))
    fresh_opt.load_state_dict(loaded.state["optimizer"])
    assert fresh_opt.param_groups[0]["betas"] == (0.8, 0.95)
    # one more identical step on both gives identical weights
    x, y = torch.randn(4, 6), torch.tensor([1, 1, 0, 2])
    for m, o in ((model, opt), (fresh, fresh_opt)):
        m(x, y)["loss"].backward()
        o.step()
    for p, q in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(p, q)

    # RNG states come back exactly: the same draws follow
    torch.set_rng_state(cpu_rng)
    set_host_rng_states(host)
    want = (torch.rand(3), random.random(), np.random.random())  # noqa: NPY002
    torch.set_rng_state(loaded.state["cpu_rng"])
    set_host_rng_states(json.loads(json.dumps(loaded.state["host"])))
    got = (torch.rand(3), random.random(), np.random.random())  # noqa: NPY002
    assert torch.equal(want[0], got[0]) and want[1:] == got[1:]


def test_tied_weights_are_stored_once(tmp_path: Path):
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.embed.weight

    torch.manual_seed(0)
    model = Tied()
    path = save_checkpoint(tmp_path, 1, model.state_dict(), {})
    meta = json.loads((path / ck.STATE_FILE).read_text())
    assert meta["aliases"] == {"out.weight": "embed.weight"}
    fresh = Tied()
    load_model_weights(path, fresh)
    assert torch.equal(fresh.embed.weight, model.embed.weight)
    assert fresh.out.weight is fresh.embed.weight


def test_crash_while_writing_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch):
    model, _ = trained_mlp_and_optimizer()
    first = save_checkpoint(tmp_path, 1, model.state_dict(), {"step": 1})

    def crash(path: Path, obj: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(ck, "_write_json", crash)  # after both safetensors files
    with pytest.raises(OSError, match="disk on fire"):
        save_checkpoint(tmp_path, 2, model.state_dict(), {"step": 2})
    monkeypatch.undo()
    assert not (tmp_path / "step-000002").exists()
    assert list_checkpoints(tmp_path) == [first]
    assert find_latest_checkpoint(tmp_path) == first
    assert read_pointer(tmp_path / "latest") == first
    assert load_checkpoint(first).state == {"step": 1}
    assert any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())  # the torn write
    clean_temporaries(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-000001"]


def test_crash_before_the_pointer_moves_still_finds_the_complete_checkpoint(
        tmp_path: Path, monkeypatch):
    model, _ = trained_mlp_and_optimizer()
    first = save_checkpoint(tmp_path, 1, model.state_dict(), {})

    def crash(path: Path, target: str) -> None:
        raise OSError("killed")

    monkeypatch.setattr(ck, "write_pointer", crash)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path, 2, model.state_dict(), {})
    monkeypatch.undo()
    assert read_pointer(tmp_path / "latest") == first
    # the renamed directory is complete, so it is the newest checkpoint
    assert find_latest_checkpoint(tmp_path) == tmp_path / "step-000002"
    # writing the same step again replaces it
    again = save_checkpoint(tmp_path, 2, model.state_dict(), {"again": True})
    assert load_checkpoint(again).state == {"again": True}
    assert read_pointer(tmp_path / "latest") == again


@pytest.mark.parametrize("intruder", ["optimizer.pt", "model.bin", "extra.pkl"])
def test_pickle_files_are_refused(tmp_path: Path, intruder: str):
    model, _ = trained_mlp_and_optimizer()
    path = save_checkpoint(tmp_path, 1, model.state_dict(), {})
    (path / intruder).write_bytes(b"\x80\x04K\x01.")  # a pickle of the number 1
    with pytest.raises(CheckpointError, match="pickle"):
        load_checkpoint(path)


def test_incomplete_or_foreign_directories_are_refused(tmp_path: Path):
    model, _ = trained_mlp_and_optimizer()
    path = save_checkpoint(tmp_path, 1, model.state_dict(), {})
    (path / ck.STATE_TENSORS_FILE).unlink()
    with pytest.raises(CheckpointError, match="missing.*state.safetensors"):
        load_checkpoint(path)
    assert list_checkpoints(tmp_path) == []

    other = save_checkpoint(tmp_path, 2, model.state_dict(), {})
    (other / "notes.txt").write_text("hi")
    with pytest.raises(CheckpointError, match="unexpected"):
        load_checkpoint(other)
    (other / "notes.txt").unlink()
    meta = json.loads((other / ck.STATE_FILE).read_text())
    (other / ck.STATE_FILE).write_text(json.dumps({**meta, "format": "something else"}))
    with pytest.raises(CheckpointError, match="not a headwise"):
        load_checkpoint(other)
    (other / ck.STATE_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="JSON"):
        load_checkpoint(other)
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        load_checkpoint(tmp_path / "nowhere")
    (other / ck.STATE_FILE).write_text(json.dumps(meta))
    (other / ck.MODEL_FILE).write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="safetensors"):
        load_checkpoint(other)


def test_unstorable_state_writes_nothing(tmp_path: Path):
    model, _ = trained_mlp_and_optimizer()
    with pytest.raises(TypeError, match="cannot store"):
        save_checkpoint(tmp_path, 1, model.state_dict(), {"fn": print})
    assert not any(tmp_path.iterdir())


def test_prune_keeps_the_newest_and_the_protected(tmp_path: Path):
    model, _ = trained_mlp_and_optimizer()
    paths = [save_checkpoint(tmp_path, s, model.state_dict(), {}) for s in (1, 2, 3, 4, 5)]
    prune_checkpoints(tmp_path, 2, protect=(paths[1],))
    assert list_checkpoints(tmp_path) == [paths[1], paths[3], paths[4]]
    prune_checkpoints(tmp_path, None)
    assert len(list_checkpoints(tmp_path)) == 3
