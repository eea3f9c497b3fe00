"""Train TinyClassifier into OUT_DIR; the resume and DDP tests run this as a subprocess.

    python run_tiny.py OUT_DIR [--resume] [--kill-at-forward N] [--kill-in-checkpoint K]

``--kill-at-forward N`` SIGKILLs the process at its N-th training forward pass (in the
middle of a step); ``--kill-in-checkpoint K`` SIGKILLs it while the K-th checkpoint is
being written (after its tensor files, before its JSON file). Run it under
``torchrun --nproc_per_node=2`` for data-parallel training.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_helpers import TinyClassifier, make_token_data  # noqa: E402

import headwise.train.checkpoint as checkpoint_module  # noqa: E402
from headwise.text.batching import pad_collate  # noqa: E402
from headwise.train import TrainConfig, Trainer  # noqa: E402


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--kill-at-forward", type=int, default=0)
    p.add_argument("--kill-in-checkpoint", type=int, default=0)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--examples", type=int, default=42)
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = TinyClassifier(dropout=args.dropout)
    if args.kill_at_forward:
        calls = [0]

        def count(module: torch.nn.Module, _inputs: object) -> None:
            if module.training:
                calls[0] += 1
                if calls[0] == args.kill_at_forward:
                    _die()

        model.register_forward_pre_hook(count)
    if args.kill_in_checkpoint:
        write_json = checkpoint_module._write_json
        saves = [0]

        def dying_write_json(path: Path, obj: object) -> None:
            if path.name == checkpoint_module.STATE_FILE:
                saves[0] += 1
                if saves[0] == args.kill_in_checkpoint:
                    _die()
            write_json(path, obj)

        checkpoint_module._write_json = dying_write_json

    config = TrainConfig(lr=0.05, weight_decay=0.01, batch_size=args.batch_size,
                         grad_accum_steps=args.accum, epochs=args.epochs, warmup_steps=3,
                         schedule="cosine", max_grad_norm=1.0, seed=123, eval_every="epoch",
                         early_stopping_metric="loss", early_stopping_mode="min",
                         patience=10, checkpoint_every=4, keep_checkpoints=2, log_every=2,
                         progress=False, device="cpu")
    trainer = Trainer(model, config, make_token_data(args.examples, seed=1),
                      valid_data=make_token_data(12, seed=2), collate_fn=pad_collate,
                      out_dir=args.out_dir)
    result = trainer.train(resume=args.resume)
    world, rank = os.environ.get("WORLD_SIZE", "1"), os.environ.get("RANK", "0")
    print(f"done steps={result.steps} world_size={world} rank={rank}", flush=True)


if __name__ == "__main__":
    main()
