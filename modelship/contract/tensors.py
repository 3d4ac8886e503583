"""`Tensors`: named arrays, the one shape of every model input and output set that crosses a layer (an input set, a
runner's outputs, a probe's intermediate tensors, a Triton response)."""

from __future__ import annotations

import numpy as np

Tensors = dict[str, np.ndarray]
