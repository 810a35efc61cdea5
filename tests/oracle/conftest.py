"""The oracle suite: jta against live TensorFlow (spec §8 cases, random programs, workloads).

TensorFlow is the oracle; it is installed by the ``test`` extra, so in CI nothing here skips.
Shared helpers import as ``tests.helpers``; this folder's own as ``tests.oracle._tf_cases`` and
``tests.oracle._programs``.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
