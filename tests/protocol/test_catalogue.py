"""The API catalogue is released by level: a golden copy of each level's catalogue is kept
(tests/protocol/golden/level-N.json), and a released method, parameter, result key or event
type never changes or disappears; what is added comes with a new API_LEVEL and its golden
copy. (Event fields are described in words in EVENT_TYPES; their names are not checked.)

To release a new level: raise API_LEVEL in roost/protocol/_version.py, then write its copy:
``uv run python -m tests.protocol.test_catalogue``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roost.loop import EVENT_TYPES
from roost.protocol import API_LEVEL, METHODS

GOLDEN = Path(__file__).resolve().parent / "golden"


def catalogue() -> dict[str, Any]:
    """The catalogue as a golden copy holds it: each method's params (type, required) and
    result keys, and the event types."""
    return {
        "level": API_LEVEL,
        "methods": {
            m.name: {
                "params": {p.name: {"type": p.type, "required": p.required} for p in m.params},
                "returns": list(m.returns),
            }
            for m in METHODS
        },
        "events": sorted(EVENT_TYPES),
    }


def _released() -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(GOLDEN.glob("level-*.json"))]


def test_the_current_level_is_released_exactly() -> None:
    path = GOLDEN / f"level-{API_LEVEL}.json"
    assert path.exists(), f"no golden copy of API level {API_LEVEL}: write it (see this module's docstring)"
    assert json.loads(path.read_text()) == catalogue(), (
        f"the catalogue changed but API_LEVEL is still {API_LEVEL}: raise it and write the new level's copy"
    )


def test_no_released_method_param_result_or_event_changes_or_goes() -> None:
    now = catalogue()
    for old in _released():
        level = old["level"]
        for name, method in old["methods"].items():
            assert name in now["methods"], f"method {name} of level {level} is gone"
            current = now["methods"][name]
            for param, spec in method["params"].items():
                assert param in current["params"], f"{name}({param}) of level {level} is gone"
                assert current["params"][param]["type"] == spec["type"], f"{name}({param}) changed type"
                assert spec["required"] or not current["params"][param]["required"], f"{name}({param}) became required"
            added = set(current["params"]) - set(method["params"])
            assert not any(current["params"][p]["required"] for p in added), f"{name} gained a required param"
            assert set(method["returns"]) <= set(current["returns"]), f"{name} lost result keys"
        assert set(old["events"]) <= set(now["events"]), f"event types of level {level} are gone"


if __name__ == "__main__":
    target = GOLDEN / f"level-{API_LEVEL}.json"
    target.write_text(json.dumps(catalogue(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")
