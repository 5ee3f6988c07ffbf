"""The sidecar's heap once it serves: startup frozen out of the collector's walks, a larger
youngest generation. In a process of its own: freezing this one would hide the test run's own
garbage from the collector."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json, weakref
from asya_sidecar.main import GC_FIRST_GENERATION, settle_heap
class Node: pass
gc.disable()  # only settle_heap may collect the cycle below
garbage = Node(); garbage.me = garbage; left = weakref.ref(garbage); del garbage
before = (gc.get_freeze_count(), gc.get_threshold())
settle_heap()
after = (gc.get_freeze_count(), gc.get_threshold())
print(json.dumps([before, after, GC_FIRST_GENERATION, left() is None]))
"""


def test_startup_is_collected_then_frozen_and_the_youngest_generation_collects_less_often():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    (frozen_before, threshold_before), (frozen, threshold), first, collected = json.loads(
        done.stdout
    )

    assert frozen_before == 0
    assert frozen > 1000  # the imported modules' objects, at least
    assert threshold == [first, *threshold_before[1:]]
    assert first > threshold_before[0]
    assert collected  # startup's garbage is collected, not frozen for good
