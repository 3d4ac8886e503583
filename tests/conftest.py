"""Shared test setup: deterministic, and sized for a 2-core machine."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
