"""The dropout layer of headwise's models: ``torch.nn.Dropout`` with the bulk-drawn mask."""

from __future__ import annotations

from torch import Tensor, nn

from headwise.attention.dropout import dropout


class Dropout(nn.Dropout):
    """``torch.nn.Dropout`` (Srivastava et al. 2014) drawing its keep mask in bulk on the CPU
    (:func:`headwise.attention.dropout`: the drop probability rounded to a multiple
    of 1/65536, the mask from torch's default generator); the same module everywhere else,
    so code that looks for ``nn.Dropout`` layers (to turn them off, or on for Monte Carlo
    dropout) finds these too.

    Args:
        p: the drop probability, in [0, 1].

    Raises:
        ValueError: ``p`` outside [0, 1].
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__(p)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)
