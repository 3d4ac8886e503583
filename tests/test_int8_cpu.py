"""Where an INT8 variant is to be served decides which weights are judged, and is recorded: the kind of CPU
(contract.cpu_kinds), the weight ranges judged for each pair of this CPU and the target (export.int8_strategy), the
manifest's details and the published config's note, and `modelship serve`'s warning when a variant made for VNNI
CPUs is served on one without."""

from __future__ import annotations

import pytest

from modelship.contract.artifact_details import Int8Details
from modelship.contract.cpu_kinds import PARAM_INT8_CPU, CpuKind, cpu_kind, held_only_on_vnni
from modelship.export.precision.int8.strategy import weight_ranges

FLAGS = "flags\t\t: fpu vme sse sse2 avx avx2 fma"


def test_the_cpu_kind_is_read_off_its_flags() -> None:
    assert cpu_kind(FLAGS) is CpuKind.AVX2
    assert cpu_kind(FLAGS + " avx512f avx512_vnni") is CpuKind.VNNI
    assert cpu_kind(FLAGS + " avx_vnni") is CpuKind.VNNI


@pytest.mark.parametrize(
    ("here", "target", "ranges"),
    [
        (CpuKind.VNNI, CpuKind.VNNI, (True, False)),  # full-range judged where it does not saturate
        (CpuKind.VNNI, CpuKind.AVX2, (True,)),  # a full-range verdict here would not hold there
        (CpuKind.AVX2, CpuKind.AVX2, (True, False)),  # judged with the saturation: holds anywhere
        (CpuKind.AVX2, CpuKind.VNNI, (True, False)),
    ],
)
def test_the_weights_judged_follow_where_the_variant_will_be_served(
    here: CpuKind, target: CpuKind, ranges: tuple[bool, ...]
) -> None:
    judged, why = weight_ranges(here, target, declared=here is not target)
    assert judged == ranges
    assert ("this CPU, the default" in why) is (here is target) and target.description in why


def test_a_full_range_variant_judged_on_vnni_says_it_holds_there_only() -> None:
    vnni_only = Int8Details(recipe="static QDQ U8S8, per-channel", target_cpu="vnni", judged_on="vnni",
                            full_range_weights=True)  # fmt: skip
    note = vnni_only.triton_parameters()[PARAM_INT8_CPU]
    assert note.startswith("vnni: static QDQ U8S8") and held_only_on_vnni(note)
    assert any("VNNI CPUs only" in line for line in vnni_only.lines())
    for anywhere in (
        Int8Details(recipe="r", target_cpu="vnni", judged_on="vnni", full_range_weights=False),
        Int8Details(recipe="r", target_cpu="avx2", judged_on="avx2", full_range_weights=True),
    ):
        assert not held_only_on_vnni(anywhere.triton_parameters()[PARAM_INT8_CPU])
    assert Int8Details().triton_parameters() == {}  # a manifest written before the target was recorded


class _Client:
    def __init__(self, notes: dict[str, str]) -> None:
        self.notes = notes

    def model_config(self, name: str) -> dict:
        note = self.notes.get(name)
        return {"parameters": {PARAM_INT8_CPU: {"string_value": note}}} if note else {"parameters": {}}


def test_serving_a_vnni_only_variant_on_an_avx2_cpu_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    from modelship.cli import serve

    details = Int8Details(recipe="r", target_cpu="vnni", judged_on="vnni", full_range_weights=True)
    client = _Client({"m_onnx_int8": details.triton_parameters()[PARAM_INT8_CPU]})
    monkeypatch.setattr(serve, "this_cpu", lambda: CpuKind.AVX2)
    (warning,) = serve._cpu_warnings(client, ["m_onnx", "m_onnx_int8"])  # type: ignore[arg-type]
    assert warning.startswith("m_onnx_int8: made for VNNI CPUs") and "--int8-cpu avx2" in warning
    monkeypatch.setattr(serve, "this_cpu", lambda: CpuKind.VNNI)
    assert serve._cpu_warnings(client, ["m_onnx_int8"]) == []  # type: ignore[arg-type]
