"""The stop watch sees a real SIGSTOP of its process, and nothing when none came."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CHILD = """
import sys, time
from asrdist.parallel.processes.stopwatch import StopWatch
watch = StopWatch()
print("ready", flush=True)
sys.stdin.readline()  # the parent stops this process meanwhile, then wakes it and writes
print(f"{watch.stopped_for():.2f}", flush=True)
"""


def _stopped_for(stop_s: float) -> float:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    if stop_s:
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(stop_s)
        os.kill(child.pid, signal.SIGCONT)
    out, _ = child.communicate("go\n", timeout=30)
    return float(out.strip())


def test_a_stop_of_the_process_is_measured_and_no_stop_is_next_to_nothing():
    assert 1.8 < _stopped_for(2.0) < 4.0
    assert _stopped_for(0.0) < 0.5
