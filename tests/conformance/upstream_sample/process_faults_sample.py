"""Tests that end or hang their process, for tests/conformance/test_upstream.py: the runner must
record them (``crashed``, ``timeout``) and carry on with the next test in a fresh process. Plain
tests without torch, so each restart is quick; run in name order."""

import os
import time


def test_a_passes():
    assert os.getpid() > 0


def test_b_exits_the_interpreter():
    os._exit(3)


def test_c_hangs():
    time.sleep(600)


def test_d_runs_after_both():
    assert os.getpid() > 0
