"""modelship export: checkpoint loading, TorchScript/ONNX export, fp16 variants and parity verification.

Importing this package is cheap: heavy dependencies (torch, onnx) are imported by the submodules that need them.
"""
