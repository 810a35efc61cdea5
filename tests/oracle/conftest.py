"""The oracle suite: jta against live TensorFlow (spec §8 cases, random programs, workloads).

TensorFlow is the oracle; it is installed by the ``test`` extra, so in CI nothing here skips.
The helpers one level up (``_kmodes``, ``_gradkit``) are importable from these tests.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
