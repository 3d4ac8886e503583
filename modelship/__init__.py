"""modelship: from a PyTorch checkpoint to a model answering requests in Triton, with parity proven at every step.

Everything imports as `modelship.*` only: the repository's top-level folders are mapped into this namespace
(pyproject.toml `package-dir`), so a user's own `export.py`, `serve.py` or `preprocess.py` never shadows them.
"""

__version__ = "0.1.0"
