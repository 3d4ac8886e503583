"""A user's own code, `package.module:Factory` (and a pickled module's class with --trust-checkpoint): nothing is
known beyond what the checkpoint's metadata says. The fallback family: it owns every name no other family owns."""

from __future__ import annotations

from modelship.checkpoint.families.registry import ModelFamily, register_family

FAMILY = register_family(ModelFamily("factory", owns=lambda arch: True, fallback=True))
