"""The one way modelship looks inside an ONNX graph as it runs: `Probe` exposes the intermediate tensors asked for
as extra outputs of a copy of the graph and runs it in ONNX Runtime with its graph optimisations off, so every
tensor is the one the graph itself writes (an optimised session fuses nodes and computes others). fp16's range
measurement, INT8's node ranking and smoothing, and the localisation of an ONNX artifact all read tensors through
it."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from modelship.contract.tensors import Tensors


class Probe:
    """The graph at `source` (a ModelProto or a path) answering the tensors of `tensors` it has (`names`: those, in
    the order asked), as ONNX Runtime computes them on the CPU with no graph optimisation."""

    def __init__(self, source: onnx.ModelProto | Path, tensors: Sequence[str]) -> None:
        import onnxruntime as ort

        model = onnx.load(str(source)) if isinstance(source, Path) else copy.deepcopy(source)
        written = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
        self.names = list(dict.fromkeys(t for t in tensors if t in written))
        present = {o.name for o in model.graph.output}
        for name in self.names:
            if name not in present:
                model.graph.output.append(onnx.ValueInfoProto(name=name))  # any type: ONNX Runtime infers it
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # every node as written
        options.log_severity_level = 3
        self._session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name: i.type for i in self._session.get_inputs()}

    def run(self, inputs: Tensors) -> Tensors:
        """The exposed tensors for one input set (inputs the graph does not take are left out; float inputs are
        given as the graph declares them)."""
        feeds = {
            name: np.asarray(inputs[name], dtype=np.float32) if kind == "tensor(float)" else inputs[name]
            for name, kind in self._inputs.items()
        }
        return dict(zip(self.names, self._session.run(self.names, feeds), strict=True))
