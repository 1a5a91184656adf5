"""cluster.yaml is a config `ray up` accepts: it validates against the schema Ray's autoscaler ships."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[1]


def test_cluster_yaml_validates_against_rays_schema():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    validate_config(prepare_config(config))  # what `ray up` does: fill defaults, check the schema
    slots = {name: t["resources"].get("raysweep_slot") for name, t in config["available_node_types"].items()}
    assert slots == {"head": None, "gpu_worker_8x": 8}
    assert any("torch==2.13.0" in c for c in config["setup_commands"])


def test_the_schema_check_catches_a_bad_key():
    import jsonschema

    config = yaml.safe_load((ROOT / "cluster.yaml").read_text()) | {"max_wokers": 3}
    with pytest.raises(jsonschema.ValidationError, match="max_wokers"):
        validate_config(config)
