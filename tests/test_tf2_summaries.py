"""``tf.summary`` writes in an imported ``tf.function``: no-ops, with a warning.

A train step that logs (``with writer.as_default(step=...)``, ``tf.summary.write`` and the writer's flush,
in straight-line code, a loop, a ``record_if`` cond and an inner ``tf.function``) imports and computes
TensorFlow's values, eagerly, under ``jax.jit``, under ``jta.checked`` and through ``jax.grad``; the
import warns that it writes no summaries. Every summary write op the import accepts runs, built with
``tf.raw_ops`` (the tensorboard plugins emit ``WriteSummary``; tensorflow-cpu ships without them). A
writer created inside the function is captured too (TF creates it outside the graph); TF1's summary protos
are refused naming the way out.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._ops_logging import SUMMARY_OPS  # noqa: E402
from tests.helpers.tf2_steps import op_types  # noqa: E402

X = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)


def _import(f: Any, *args: Any) -> tuple[Any, Any]:
    """``f`` imported with ``with_updates=True``, asserting the one warning about summaries."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn, params = jta.import_function(f, *args, with_updates=True)
    texts = [str(w.message) for w in caught if "summar" in str(w.message)]
    assert len(texts) == 1 and "writes none" in texts[0], [str(w.message) for w in caught]
    return fn, params


def test_a_train_step_that_logs_computes_tensorflows_values(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    step = tf.Variable(0, dtype=tf.int64, name="step")
    v = tf.Variable(np.full((3,), 0.5, np.float32), name="v")

    @tf.function
    def log_loss(loss: Any) -> Any:  # an inner tf.function: the writer reaches it as an argument
        return tf.summary.write("inner", loss)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def train_step(x: Any) -> Any:
        with writer.as_default(step=step):
            with tf.GradientTape() as tape:
                h = x * v
                for i in tf.range(tf.shape(x)[0]):  # a loop whose trip count the data decides
                    tf.summary.write("h", h, step=tf.cast(i, tf.int64))
                    h = tf.tanh(h) + v
                loss = tf.reduce_sum(h ** 2)
            with tf.summary.record_if(loss > 1.0):  # a cond on a traced predicate
                tf.summary.write("loss", loss)
            log_loss(loss)
            g = tape.gradient(loss, v)
            step.assign_add(1)
        return loss, g

    assert {"WriteSummary", "FlushSummaryWriter"} <= op_types(train_step)
    fn, params = _import(train_step, X)
    want_loss, want_grad = (t.numpy() for t in train_step(X))
    for how, run in {"eager": fn, "jit": jax.jit(fn), "checked": jta.checked(fn)}.items():
        (loss, grad), new = run(params, X)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-6, err_msg=how)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6, err_msg=how)
        assert int(new["step"]) == 1, how


def test_jax_grad_through_a_function_that_logs(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32)])
    def forward(x: Any) -> Any:
        with writer.as_default(step=0):
            y = tf.sin(x) * x
            tf.summary.write("y", y)
        return tf.reduce_sum(y)

    fn, params = _import(forward, X)
    xt = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        loss = forward(xt)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: fn(params, x)[0]))(X), tape.gradient(loss, xt),
                               rtol=1e-6)


def test_every_summary_write_op_is_a_no_op(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    image = np.zeros((1, 2, 2, 3), np.uint8)

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32)])
    def logs(x: Any) -> Any:
        h, s = writer._resource, tf.constant(3, tf.int64)
        tf.raw_ops.WriteScalarSummary(writer=h, step=s, tag="s", value=tf.reduce_sum(x))
        tf.raw_ops.WriteHistogramSummary(writer=h, step=s, tag="h", values=x)
        tf.raw_ops.WriteImageSummary(writer=h, step=s, tag="i", tensor=tf.cast(x[None, :, :2, None], tf.float32)
                                     * tf.ones([1, 1, 1, 3]), bad_color=tf.constant([255, 0, 0, 255], tf.uint8))
        tf.raw_ops.WriteImageSummary(writer=h, step=s, tag="u", tensor=tf.constant(image),
                                     bad_color=tf.constant([255, 0, 0, 255], tf.uint8))
        tf.raw_ops.WriteAudioSummary(writer=h, step=s, tag="a", tensor=x, sample_rate=8000.0)
        tf.raw_ops.WriteRawProtoSummary(writer=h, step=s, tensor=tf.constant([b""]))
        tf.raw_ops.FlushSummaryWriter(writer=h)
        tf.raw_ops.CloseSummaryWriter(writer=h)
        return x * 2

    assert op_types(logs) >= set(SUMMARY_OPS) - {"WriteSummary", "WriteGraphSummary"}
    fn, params = _import(logs, X)
    np.testing.assert_array_equal(jax.jit(fn)(params, X)[0], X * 2)


def test_a_writer_created_inside_the_function_runs_and_v1_summaries_are_refused(tmp_path):
    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32)])
    def creates(x: Any) -> Any:  # (TF creates the writer outside the graph: the function captures it)
        with tf.summary.create_file_writer(str(tmp_path)).as_default(step=0):
            tf.summary.write("x", x)
        return x + 1

    fn, params = _import(creates, X)
    np.testing.assert_array_equal(fn(params, X)[0], X + 1)

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32)])
    def v1(x: Any) -> Any:
        return x + 1, tf.compat.v1.summary.histogram("x", x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (TF's: no default writer for TF1's summary ops)
        with pytest.raises(jta.errors.UnimplementedError, match="not TF1's summary protos") as info:
            jta.import_function(v1, X)
    assert "HistogramSummary" in str(info.value)
