"""The whole journey on a model that means something: `python -m modelship.demo` (what `make demo` runs).

Train a small CNN on scikit-learn's handwritten digits, save a training checkpoint, export it with the real
`export-model` CLI (TorchScript, ONNX, fp16), check parity, publish to model_repo/, start Triton, classify held-out
digit images over HTTP and gRPC, check the served model's parity, stop the server.
"""
