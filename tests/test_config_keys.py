"""``raysweep/config_keys.py``: the one walk of a dotted path into a nested config."""

from __future__ import annotations

import pytest

from raysweep.config_keys import apply_overrides, set_path

BASE = {"arch": {"stages": [{"repeat": 1}, {"repeat": 2}]}, "lr": 0.1, "opt": None}


def test_overrides_set_keys_and_list_items_in_a_copy():
    config = apply_overrides(
        BASE, {"arch.stages.1.repeat": 5, "arch.stages.-2.repeat": 3, "opt.name": "adam", "new": 1}
    )
    assert config == {"arch": {"stages": [{"repeat": 3}, {"repeat": 5}]}, "lr": 0.1, "opt": {"name": "adam"}, "new": 1}
    assert BASE["arch"]["stages"][1]["repeat"] == 2  # the base is left as it was


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("arch.stages.x", "arch.stages is a list, so 'x' must be an index"),
        ("arch.stages.2.repeat", "index 2 is out of range: arch.stages has 2 items"),
        ("arch.0", "0 indexes a list, but arch is not a list"),
        ("lr.decay", "lr is a float, not a mapping or list"),
    ],
)
def test_a_path_the_config_cannot_hold_says_where_it_stops(path, message):
    config = apply_overrides(BASE, {})
    with pytest.raises(KeyError) as e:
        set_path(config, path, 1)
    assert e.value.args[0] == message
    assert config == BASE  # nothing set on the way
