"""The sidecar's heap once it serves: startup frozen out of the collector's walks, a larger
youngest generation. In a process of its own: freezing this one would hide the test run's own
garbage from the collector."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
from asya_sidecar.main import GC_FIRST_GENERATION, settle_heap
before = (gc.get_freeze_count(), gc.get_threshold())
settle_heap()
print(json.dumps([before, (gc.get_freeze_count(), gc.get_threshold()), GC_FIRST_GENERATION]))
"""


def test_startup_is_frozen_and_the_youngest_generation_collects_less_often():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    (frozen_before, threshold_before), (frozen, threshold), first = json.loads(done.stdout)

    assert frozen_before == 0
    assert frozen > 1000  # the imported modules' objects, at least
    assert threshold == [first, *threshold_before[1:]]
    assert first > threshold_before[0]
