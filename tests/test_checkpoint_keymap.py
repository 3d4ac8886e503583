"""Prefix stripping, key maps, rename suggestions and grouping, on plain key lists (no models)."""

from __future__ import annotations

import pytest

from modelship.checkpoint.keymap import KeyMap, apply_key_map, load_key_map, strip_wrappers, suggest_renames
from modelship.checkpoint.matching import compare_keys, group_keys, summarize


def test_strip_only_what_makes_keys_match():
    target = {"model.conv.weight", "fc.weight"}
    keys = ["module.model.conv.weight", "module.fc.weight", "module.extra.weight"]
    assert strip_wrappers(keys, target) == {
        "module.model.conv.weight": "model.conv.weight",  # the model's own `model.` stays
        "module.fc.weight": "fc.weight",
        "module.extra.weight": "extra.weight",  # unmatched keys lose the prefix their siblings lost
    }


def test_key_map_from_toml_and_json(tmp_path):
    toml = tmp_path / "map.toml"
    toml.write_text(
        'drop = ["*.position_ids"]\n[rename]\n"head.w" = "fc.weight"\n[[regex]]\npattern = "^blocks\\\\."\n'
        'replace = "layers."\n'
    )
    key_map = load_key_map(toml)
    assert key_map == KeyMap(drop=["*.position_ids"], rename={"head.w": "fc.weight"}, regex=[("^blocks\\.", "layers.")])
    as_json = tmp_path / "map.json"
    as_json.write_text(
        '{"drop": ["*.position_ids"], "rename": {"head.w": "fc.weight"}, '
        '"regex": [{"pattern": "^blocks\\\\.", "replace": "layers."}]}'
    )
    assert load_key_map(as_json) == key_map
    mapping, dropped, unused = apply_key_map(["emb.position_ids", "head.w", "blocks.0.w", "x"], key_map)
    assert mapping == {"head.w": "fc.weight", "blocks.0.w": "layers.0.w", "x": "x"}
    assert dropped == ["emb.position_ids"]
    assert unused == []
    _, _, unused = apply_key_map(["x"], key_map)
    assert unused == ["drop *.position_ids", "rename head.w", "regex ^blocks\\."]


def test_suggestions_single_key_and_module():
    missing = {"fc1.weight": (4, 8), "fc1.bias": (4,), "norm.weight": (8,)}
    unexpected = {"fc_1.weight": (4, 8), "fc_1.bias": (4,), "totally.different": (8,)}
    (suggestion,) = suggest_renames(missing, unexpected)
    assert suggestion.rule == {"regex": [{"pattern": "^fc_1\\.", "replace": "fc1."}]}
    (single,) = suggest_renames({"norm.weight": (8,)}, {"norn.weight": (8,), "norm.weigth": (9,)})
    assert single.rule == {"rename": {"norn.weight": "norm.weight"}}


def test_compare_and_group():
    model = {f"layer{i}.{j}.weight": (2,) for i in range(4) for j in range(30)} | {"bn.num_batches_tracked": ()}
    result = compare_keys({}, model, allow_missing=("layer3.*",))
    assert len(result.missing) == 90 and len(result.allowed_missing) == 31  # num_batches_tracked is harmless
    assert group_keys(result.missing) == [("layer0", 30), ("layer1", 30), ("layer2", 30)]
    assert summarize(result.missing) == "layer0 (30), layer1 (30), layer2 (30)"


@pytest.mark.parametrize("content", ['{"rename": ["a"]}', '{"regex": [{"pattern": "("}]}', "[]"])
def test_invalid_key_maps(tmp_path, content):
    from modelship.contract.errors import UsageError

    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=r"m\.json"):
        load_key_map(path)
