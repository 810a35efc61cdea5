"""TensorFlow's mode K: a ``tf.compat.v1`` graph with control flow v1 (TF is imported lazily)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def k_graph() -> Iterator[Any]:
    """A fresh TF1 graph with control flow v1 (mode K); the global switch is restored on exit.

    Control flow v1 is a process-wide switch in TF: this turns it off only while one fresh
    graph is built and run."""
    import tensorflow as tf

    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            yield graph
    finally:
        if was_v2:
            tf.compat.v1.enable_control_flow_v2()
