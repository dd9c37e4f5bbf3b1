"""F.ctc_loss in a form a training step exports: the lossops custom op `lossops::ctc_loss` (its backward
`lossops::ctc_loss_backward`), which the exporter translates to the CtcLoss and CtcLossBackward nodes.
`aten._ctc_loss` itself cannot be traced: its log-alpha table's shape depends on the lengths' values. An unbatched
call ((T, C) log-probabilities) runs as a batch of one. Needs torch."""

from __future__ import annotations

from ..converters import torch_ops  # noqa: F401 (defines torch.ops.lossops.ctc_loss)
from ..extras import require
from ..opset.spec import REDUCTIONS

torch = require("torch", "training-step export", extra="train")
from torch import Tensor  # noqa: E402


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor | None:
    """F.ctc_loss's value and gradient as the lossops op; None where PyTorch refuses the call (it then says why)
    or where the log-probabilities are narrower than float32 (PyTorch's own ctc_loss takes no narrower type, so
    the step could not be checked against it)."""
    lengths = [torch.as_tensor(v) for v in (input_lengths, target_lengths)]
    if any(v.dtype.is_floating_point or v.dim() > 1 for v in lengths) or log_probs.dim() not in (2, 3):
        return None
    if log_probs.dtype not in (torch.float32, torch.float64) or reduction not in REDUCTIONS[:3]:
        return None
    single = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if single else log_probs  # (T, N, C)
    batch = lp.shape[1]
    input_lengths, target_lengths = (v.reshape(batch).to(torch.int64) for v in lengths)
    labels = targets.reshape(1, -1) if single and targets.dim() == 1 else targets
    loss = torch.ops.lossops.ctc_loss(lp, labels.to(torch.int64), input_lengths, target_lengths, blank,
                                      REDUCTIONS.index(reduction), bool(zero_infinity))
    return loss.squeeze(0) if single and reduction == "none" else loss
