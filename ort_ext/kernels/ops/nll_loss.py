"""Kernel of NLLLoss: a row's loss is -weight[c] * input[c]."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load
from ..registry import row_kernel


@row_kernel("NLLLoss", task_elements=1 << 16)
@numba.njit(error_model="numpy", nogil=True)
def nll_loss(x, s, _c, t, _w, _weighted, wt, _spread, _params):
    return -wt * np.float64(load(x[t * s]))
