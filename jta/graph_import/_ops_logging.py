"""The ops whose effect is outside the values a function computes: ``tf.print`` and ``tf.summary``.

``tf.print`` is two ops: ``StringFormat`` formats the message (its ``template`` holds the Python
strings, ``placeholder`` marks where each tensor goes, ``summarize`` how many entries of each
dimension show) and ``PrintV2`` writes it, plus ``end``, to ``output_stream``. JAX has no strings, so
the import's ``StringFormat`` gives a :class:`Message`: the template's pieces and the tensors, still
JAX values; ``PrintV2`` formats it when the values exist, through ``jax.debug.callback``. Eagerly
that is at once; under ``jit`` and inside ``lax.scan``/``while_loop``/``cond`` it is from compiled
code at run time, at each step of a loop as TensorFlow prints at each step (a print at trace time
would show tracers, once). The callback is ordered, so that two prints come in program order, as
TensorFlow's automatic control dependencies order them; ``jax.grad`` runs it once, on the forward's
values, as a ``GradientTape``'s forward prints once (an eager ``jax.grad`` of a loop without a
bound counts its steps in a silent :func:`~jta._core.rehearsal.rehearsal` first), and under ``vmap``
each element prints. (A loop's probe, which runs the ops of constants to count its steps, skips them; a loop that
prints is run, not taken from the probe, where its whole carry is static.)

The text is TensorFlow's (``Tensor::SummarizeValue(summarize, print_v2=true)``): nested brackets, a
space between entries and, between the blocks of an outer dimension, one newline per inner
dimension and an indent of the dimension's depth; where a dimension has more than
``2 * min(summarize, size)`` entries its first and last ``min(summarize, size)`` show around ``...``
(``summarize=-1``: all); numbers as ``StrCat`` writes them (floats the shortest of ``%.6g``/``%.9g``
that reads back, doubles of ``%.15g``/``%.17g``, ``nan`` with its sign, subnormals flushed to zero
as TensorFlow's threads flush them, ``half``/``bfloat16`` as floats, bools ``1``/``0``, complex
entries ``?``); strings (constants only: JAX has none) quoted and C-escaped. The streams: ``stderr``
and ``stdout`` (Python's ``sys.stderr``/``sys.stdout``, which are the process's unless replaced),
``file://path`` (appended to), and ``log(info|warning|error)``, written to ``stderr`` in TensorFlow's
log line format (its time and thread are the callback's) where ``TF_CPP_MIN_LOG_LEVEL`` shows them.
Without ``jax_enable_x64`` a float64 tensor is a float32 in JAX, and prints as one.

The summary ops are imported as no-ops: the imported function writes no summary (return the values to
log and log them from Python). :func:`jta.import_function` warns when the function writes summaries
(:data:`SUMMARY_OPS`): what it drops is no value, but it is what a run records. A summary writer is a
resource the function captures (``tf.summary.create_file_writer`` outside it); the import hands the
ops that take it a placeholder, :data:`WRITER`: JAX has no resources, and only these no-ops read it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from jax.core import Tracer

from .._core.rehearsal import rehearsing
from ._nodes import Node
from ._ops import OPS, is_static, registrar
from ._ops_checks import invalid
from ._tensor_text import summarize_value

try:  # (JAX's switch of jax.ensure_compile_time_eval)
    from jax._src.config import eager_constant_folding as _folding
except ImportError:  # pragma: no cover
    _folding = None

_reg = registrar(OPS)

# tf.summary's writes to a writer (summary_ops_v2; the tensorboard plugins' scalar, histogram, image,
# audio and text all emit WriteSummary) and the writer's flush and close
SUMMARY_OPS = ("WriteSummary", "WriteScalarSummary", "WriteHistogramSummary", "WriteImageSummary",
               "WriteAudioSummary", "WriteRawProtoSummary", "WriteGraphSummary", "FlushSummaryWriter",
               "CloseSummaryWriter")

# the captured writer's handle: static (loops and conds pass it through as they pass constants)
WRITER = np.asarray(b"<a tf.summary writer: jta writes no summaries>", dtype=object)

STREAMS = ("stdout", "stderr", "log(info)", "log(warning)", "log(error)")  # PrintV2's, and file://<path>
# log(...): the severity letter, TF_CPP_MIN_LOG_LEVEL's level and the line of TensorFlow's LOG call
_LOGS = {"log(info)": ("I", 0, 169), "log(warning)": ("W", 1, 171), "log(error)": ("E", 2, 173)}


class Message:
    """``StringFormat``'s string: ``pieces[0] + text(values[0]) + pieces[1] + ...``, each value written
    with ``summarize`` (the pieces are bytes; the values JAX or NumPy arrays, written when known)."""

    def __init__(self, pieces: tuple[bytes, ...], values: tuple[Any, ...], summarize: int):
        self.pieces, self.values, self.summarize = pieces, values, summarize

    def text(self, values: tuple[Any, ...]) -> bytes:
        """The string, of these (concrete) ``values``."""
        texts = [summarize_value(np.asarray(v), self.summarize) for v in values]
        return b"".join(p + t for p, t in zip(self.pieces, [*texts, b""], strict=True))

    def __str__(self) -> str:
        # (the text where the values are known: what an eager tf.Assert of a tf.strings.format writes)
        if any(isinstance(v, Tracer) for v in self.values):
            return repr(self)
        return self.text(self.values).decode("utf-8", "backslashreplace")

    def __repr__(self) -> str:
        return f"<a tf.strings.format string of {len(self.values)} tensors>"


def _text(attr: Any) -> bytes:
    return attr if isinstance(attr, bytes) else str(attr).encode()


@_reg("StringFormat")
def _string_format(node: Node, args: list[Any]) -> list[Any]:
    """``tf.strings.format``: the template cut at its placeholders, around the inputs (a string input,
    a constant, is written now, into the pieces)."""
    pieces = _text(node.attr("template", b"%s")).split(_text(node.attr("placeholder", b"{}")))
    if len(pieces) - 1 != len(args):
        invalid(node, f"num placeholders in template and num inputs must match: {len(pieces) - 1} vs. {len(args)}")
    summarize = int(node.attr("summarize", 3))
    merged, values = [pieces[0]], []
    for value, piece in zip(args, pieces[1:], strict=True):
        if is_static(value) and np.asarray(value).dtype.kind == "O":
            merged[-1] += summarize_value(np.asarray(value), summarize) + piece
        else:
            values.append(value)
            merged.append(piece)
    return [Message(tuple(merged), tuple(values), summarize)]


@_reg("PrintV2")
def _print_v2(node: Node, args: list[Any]) -> list[Any]:
    """``tf.print``: the message plus ``end`` written to ``output_stream`` when the values exist (see the
    module's note); no outputs."""
    stream, end = _text(node.attr("output_stream", b"stderr")).decode(), _text(node.attr("end", b"\n"))
    if not stream.startswith("file://") and stream not in STREAMS:
        invalid(node, f"Unknown output stream: {stream}, Valid streams are: {' '.join(STREAMS)}")
    message = args[0]
    if not isinstance(message, Message):  # a string tensor (a constant): printed as it is
        value = np.asarray(message)
        if value.shape != ():
            invalid(node, f"Input is expected to be scalar, but got {list(value.shape)}")
        message = Message((_text(value.item()),), (), 0)
    def emit(*values: Any) -> None:
        if not rehearsing():  # (a run repeated for its results prints at the repeat)
            _write(stream, message.text(values) + end)

    with _staged():
        jax.debug.callback(emit, *message.values, ordered=True)
    return []


@contextlib.contextmanager
def _staged() -> Iterator[None]:
    """Outside ``jax.ensure_compile_time_eval``: an op of constants is folded (run while tracing) in it,
    and the print must be from the compiled code, at each call, not once while tracing."""
    with _folding(False) if _folding is not None else contextlib.nullcontext():
        yield


def _write(stream: str, data: bytes) -> None:
    """``data`` to ``stream`` as TensorFlow's ``PrintV2`` kernel writes it."""
    if stream.startswith("file://"):
        with open(stream[len("file://"):], "ab") as file:
            file.write(data)
        return
    if stream in _LOGS:
        letter, level, line = _LOGS[stream]
        try:
            shown = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")) <= level
        except ValueError:
            shown = True
        if not shown:
            return
        data = (f"{letter}0000 00:00:{time.time():.6f} {threading.get_native_id():>7} logging_ops.cc:{line}] "
                .encode() + data + b"\n")
    out = sys.stdout if stream == "stdout" else sys.stderr
    out.flush()
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:
        out.write(data.decode("utf-8", "backslashreplace"))
        out.flush()


@_reg(*SUMMARY_OPS)
def _summary(node: Node, args: list[Any]) -> list[Any]:
    """A summary write (or a writer's flush or close): nothing (see the module's note)."""
    return []


@_reg("Print")
def _print(node: Node, args: list[Any]) -> list[Any]:
    """TF1's ``tf.compat.v1.Print``: its first input, passed through; it prints nothing."""
    return [args[0]]
