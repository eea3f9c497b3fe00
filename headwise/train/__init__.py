"""Training: the Trainer, its configuration, schedules, checkpoints and data parallelism.

``Trainer(model, config, train_data, valid_data=..., collate_fn=..., out_dir=...)`` trains
any module whose ``forward(**batch)`` returns ``{"loss": scalar, ...}``; see
:mod:`headwise.train.trainer`. Classification metrics live in :mod:`headwise.train.metrics`.
"""

from headwise.train.checkpoint import (
    Checkpoint,
    CheckpointError,
    find_latest_checkpoint,
    load_checkpoint,
    load_model_weights,
    save_checkpoint,
)
from headwise.train.config import TrainConfig
from headwise.train.distributed import DistContext, init_distributed, shutdown_distributed
from headwise.train.early_stopping import EarlyStopping
from headwise.train.metrics import (
    classification_metrics,
    confusion_matrix_png,
    expected_calibration_error,
)
from headwise.train.optim import build_optimizer, parameter_groups
from headwise.train.precision import MixedPrecision
from headwise.train.rng import seed_everything
from headwise.train.schedule import LRSchedule, lr_factor
from headwise.train.trainer import Trainer, TrainResult

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "DistContext",
    "EarlyStopping",
    "LRSchedule",
    "MixedPrecision",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "build_optimizer",
    "classification_metrics",
    "confusion_matrix_png",
    "expected_calibration_error",
    "find_latest_checkpoint",
    "init_distributed",
    "load_checkpoint",
    "load_model_weights",
    "lr_factor",
    "parameter_groups",
    "save_checkpoint",
    "seed_everything",
    "shutdown_distributed",
]
