"""The ops whose only effect is outside the values a function computes: ``tf.print`` and ``tf.summary``.

They are imported as no-ops, as tf2jax imports ``tf.print``: the imported function prints nothing and
writes no summary (print from JAX with ``jax.debug.print``; return the values to log and log them from
Python). :func:`jta.import_function` warns when the function prints or writes summaries
(:data:`SUMMARY_OPS`): what it drops is no value, but it is what a run shows or records.

A summary writer is a resource the function captures (``tf.summary.create_file_writer`` outside it);
the import hands the ops that take it a placeholder, :data:`WRITER`, as it hands ``PrintV2`` a
placeholder message: JAX has no strings and no resources, and only these no-ops read them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._nodes import Node
from ._ops import OPS, registrar

_reg = registrar(OPS)

# tf.summary's writes to a writer (summary_ops_v2; the tensorboard plugins' scalar, histogram, image,
# audio and text all emit WriteSummary) and the writer's flush and close
SUMMARY_OPS = ("WriteSummary", "WriteScalarSummary", "WriteHistogramSummary", "WriteImageSummary",
               "WriteAudioSummary", "WriteRawProtoSummary", "WriteGraphSummary", "FlushSummaryWriter",
               "CloseSummaryWriter")

# the captured writer's handle: static (loops and conds pass it through as they pass constants)
WRITER = np.asarray(b"<a tf.summary writer: jta writes no summaries>", dtype=object)


@_reg(*SUMMARY_OPS)
def _summary(node: Node, args: list[Any]) -> list[Any]:
    """A summary write (or a writer's flush or close): nothing (see the module's note)."""
    return []


@_reg("PrintV2")
def _print_v2(node: Node, args: list[Any]) -> list[Any]:
    """``tf.print``: it has no effect on any value; the imported function prints nothing."""
    return []


@_reg("StringFormat")
def _string_format(node: Node, args: list[Any]) -> list[Any]:
    """The message ``tf.print`` formats: a placeholder string (JAX has no strings; only ``PrintV2``,
    a no-op here, reads it), whatever the inputs."""
    return [np.asarray(b"<tf.print message: not formatted by jta>", dtype=object)]


@_reg("Print")
def _print(node: Node, args: list[Any]) -> list[Any]:
    """TF1's ``tf.compat.v1.Print``: its first input, passed through; it prints nothing."""
    return [args[0]]
