"""`JsonObject`: a JSON object as Python holds it, the one type of every dict that crosses an edge as JSON (a file a
user hands in, another library's JSON, a `to_dict`). Imports nothing of modelship's, so every contract module may
use it."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]
