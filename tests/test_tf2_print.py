"""``tf.print`` in an imported function prints what TensorFlow prints (``jta.graph_import._ops_logging``).

The text of a tensor (``Tensor::SummarizeValue(summarize, print_v2=true)``) is compared with
``tf.strings.format``'s, the same kernel's, for each rule: dtypes, ranks, summaries, special floats.
Whole prints are compared with TensorFlow's own run of the ``tf.function``, both read from the
process's file descriptors (``capfd``: TensorFlow writes from C++): eagerly, under ``jax.jit``, under
``jax.grad`` (the forward's values, once), in a ``tf.while_loop`` of a data-dependent trip count (a
line per step), in a ``tf.cond`` (the branch taken only) and in a train step (a tape in the function).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._ops_logging import summarize_value  # noqa: E402

F32 = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.1, 1 / 3, 1e20, 1e-7, 123456789.0, 16777217.0,
                1e-45, -1e-39, 1.17549435e-38, 3.4028235e38, 2.5, -7.0], np.float32)
F64 = np.array([np.nan, -np.inf, -0.0, 0.1, 1 / 3, 1e16, 1e-300, 5e-324, 2.0 ** 0.5, 1e300, 3.0], np.float64)

CASES = {
    "float32": (F32, -1), "float32 summarized": (F32, 3), "float64": (F64, -1),
    "float16": (np.array([0.1, 65504, 6e-8, -2.5], np.float16), -1),
    "int32": (np.array([0, -1, 2 ** 31 - 1, -(2 ** 31)], np.int32), -1),
    "int64": (np.array([2 ** 62, -(2 ** 63)], np.int64), -1), "uint8": (np.array([0, 255], np.uint8), -1),
    "int8": (np.array([-128, 5], np.int8), -1), "uint64": (np.array([2 ** 64 - 1], np.uint64), -1),
    "bool": (np.array([[True, False], [False, True]]), -1), "bool of no entries": (np.array([True]), 0),
    "0-d": (np.float32(2.5), 3), "0-d summarize 0": (np.float32(2.5), 0),
    "1-d long": (np.arange(20, dtype=np.int32), 3), "1-d at the limit": (np.arange(6, dtype=np.int32), 3),
    "2-d": (np.arange(12, dtype=np.float32).reshape(3, 4) / 4, 3),
    "2-d summarized": (np.arange(60, dtype=np.int64).reshape(3, 20), 3),
    "3-d": (np.arange(24, dtype=np.float32).reshape(2, 3, 4), 3),
    "3-d summarize 1": (np.arange(7 * 8 * 9, dtype=np.int32).reshape(7, 8, 9), 1),
    "4-d summarize 2": (np.arange(3 ** 4, dtype=np.int32).reshape(3, 3, 3, 3), 2),
    "all of a long one": (np.arange(30, dtype=np.int32).reshape(5, 6), -1),
    "empty": (np.zeros((2, 0, 3), np.float32), 3), "empty 1-d": (np.zeros(0, np.float32), 3),
    "summarize 0": (np.array([5.0, 6.0], np.float32), 0), "one of many": (np.ones((1, 1, 6), np.float32), 3),
    "complex": (np.zeros((2, 3), np.complex64), 2),
    "strings": (np.array([b"a\nb\t\\\"'\x01\x7f", "é".encode()], dtype=object), 3),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tensor_is_written_as_tensorflow_writes_it(case):
    value, summarize = CASES[case]
    want = tf.strings.format("{}", tf.constant(value), summarize=summarize).numpy()
    assert summarize_value(np.asarray(value), summarize) == want


def test_a_bfloat16_is_written_as_a_float():
    value = tf.constant([0.1, 3.0, -1e-3], tf.bfloat16)
    assert summarize_value(value.numpy(), 3) == tf.strings.format("{}", value).numpy()


def _texts(capfd: Any) -> tuple[str, str]:
    jax.effects_barrier()  # (the callbacks of compiled code)
    sys.stdout.flush()
    sys.stderr.flush()
    out, err = capfd.readouterr()
    return out, err


def _import(f: Any, *args: Any) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a function that prints imports without a warning now)
        return jta.import_function(f, *args)


def _same_prints(capfd: Any, f: Any, *args: np.ndarray, modes: tuple[str, ...] = ("eager", "jit")) -> str:
    """What TF's call of ``f`` prints, printed by the import in each of ``modes`` too; returns it."""
    jax.block_until_ready(jnp.zeros(()))
    capfd.readouterr()
    f(*args)
    want = _texts(capfd)
    assert want[0] or want[1]
    fn, params = _import(f, *args)
    for mode in modes:
        if mode == "eager":
            fn(params, *args)
        elif mode == "jit":
            jax.block_until_ready(jax.jit(fn)(params, *args))
        else:  # the forward under jax.grad ("grad", "jit grad"): its values, once
            grad = jax.grad(lambda x: jnp.sum(fn(params, x, *args[1:])))
            jax.block_until_ready((jax.jit(grad) if mode == "jit grad" else grad)(jnp.asarray(args[0])))
        assert _texts(capfd) == want, mode
    return want[0] + want[1]


def test_several_values_with_sep_and_end_eagerly_under_jit_and_grad(capfd):
    @tf.function(input_signature=[tf.TensorSpec([5], tf.float32), tf.TensorSpec([], tf.int32)])
    def f(x, i):
        tf.print("loss:", tf.reduce_sum(x), "step", i, {"x": x}, [i, 2.5], sep=" | ", end="!\n")
        tf.print(x > 0, x / 3, tf.cast(x, tf.int64) - 2, summarize=2)
        tf.print("to stdout", x[:2], output_stream=sys.stdout)
        tf.print(tf.constant("a string, as it is"))
        return x * 2.0

    x = np.array([0.5, -1.25, 3.0, 1e-8, -0.0], np.float32)
    printed = _same_prints(capfd, f, x, np.int32(7), modes=("eager", "jit", "grad"))
    assert "loss: | 2.25 | step | 7 | {'x': [0.5 -1.25 3 1e-08 -0]} | [7, 2.5]!\n" in printed


def test_float64_values_under_x64(capfd):
    @tf.function(input_signature=[tf.TensorSpec([3], tf.float64)])
    def f(x):
        tf.print(x / 3, x[0])
        return x

    with jax.enable_x64(True):
        _same_prints(capfd, f, np.array([1.0, -0.1, 1e300]))


@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def _data_dependent_loop(x):
    i = tf.constant(0)
    while tf.reduce_sum(x) < 10.0:
        tf.print("step", i, "x", x)
        tf.print("in the loop")  # (messages of constants: at each step, and never while tracing)
        tf.print(tf.constant("a string tensor"))
        x, i = x * 2.0, i + 1
    return x


def test_a_while_loop_of_a_data_dependent_trip_count_prints_at_each_step(capfd):
    printed = _same_prints(capfd, _data_dependent_loop, np.array([1.5, 0.25], np.float32),
                           modes=("eager", "jit", "jit grad"))
    assert printed.count("in the loop") == 3


def test_an_eager_grad_of_a_data_dependent_loop_prints_each_step_once(capfd):
    """An eager ``jax.grad`` of a loop without a bound runs it once to count its steps, then again filling
    its stacks: the counting run is a rehearsal, silent."""
    _same_prints(capfd, _data_dependent_loop, np.array([1.5, 0.25], np.float32), modes=("grad",))


def test_a_loop_of_static_values_prints_at_each_step(capfd):
    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def f(x):
        i = tf.constant(0)
        while x < 10.0:
            tf.print("step", i, "x", x)
            x, i = x * 2.0, i + 1
        for k in tf.range(2):
            tf.print("constant step", k)
        return x

    _same_prints(capfd, f, np.float32(1.5))


def test_a_cond_prints_its_branch_taken(capfd):
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def f(x):
        def yes():
            tf.print("positive", x)
            return x + 1.0

        def no():
            tf.print("not positive", x)
            return x - 1.0
        return tf.cond(tf.reduce_sum(x) > 0, yes, no)

    for x in (np.array([1.0, 2.0], np.float32), np.array([-1.0, 0.5], np.float32)):
        assert _same_prints(capfd, f, x).count("positive") == 1


def test_a_train_step_prints_its_forward_once(capfd):
    v = tf.Variable(np.array([0.5, -1.0], np.float32))

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def step(x):
        with tf.GradientTape() as tape:
            y = x * v
            tf.print("forward", y)
            loss = tf.reduce_sum(y ** 2)
        tf.print("loss", loss)
        return loss, tape.gradient(loss, v)

    printed = _same_prints(capfd, step, np.array([1.0, 2.0], np.float32))
    assert printed.count("forward") == 1


def test_a_file_stream_is_appended_to(tmp_path, capfd):
    path = tmp_path / "printed.txt"

    @tf.function(input_signature=[tf.TensorSpec([3], tf.int32)])
    def f(x):
        tf.print("x", x, output_stream=f"file://{path}")
        return x + 1

    x = np.array([1, 2, 3], np.int32)
    f(x)
    fn, params = _import(f, x)
    fn(params, x)
    jax.block_until_ready(jax.jit(fn)(params, x))
    jax.effects_barrier()
    assert path.read_text() == "x [1 2 3]\n" * 3


def test_a_log_stream_writes_tensorflows_log_line_where_the_level_shows_it(capfd, monkeypatch):
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def f(x):
        tf.print("w", x, output_stream=tf.compat.v1.logging.warning)
        return x

    x = np.array([1.0, 2.0], np.float32)
    fn, params = _import(f, x)
    capfd.readouterr()
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")
    fn(params, x)
    err = _texts(capfd)[1]
    assert err.startswith("W0000 00:00:") and err.endswith(" logging_ops.cc:171] w [1 2]\n\n"), err
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    fn(params, x)
    assert _texts(capfd) == ("", "")


def test_vmap_prints_each_element(capfd):
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def f(x):
        tf.print("x", x)
        return x

    fn, params = _import(f, np.zeros(2, np.float32))
    capfd.readouterr()
    jax.block_until_ready(jax.vmap(lambda x: fn(params, x))(jnp.array([[1.0, 2.0], [3.0, 4.0]])))
    assert sorted(_texts(capfd)[1].splitlines()) == ["x [1 2]", "x [3 4]"]


def test_an_eager_assert_writes_a_formatted_string_as_tensorflow_does():
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def f(x):
        tf.debugging.Assert(tf.reduce_all(x > 0), [tf.strings.format("x={}", x)])
        return x * 2

    x = np.array([1.0, -2.0], np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"assertion failed: \[x=\[1 -2\]\]"):
        f(x)
    fn, params = jta.import_function(f, x)
    with pytest.raises(jta.errors.InvalidArgumentError, match=r"assertion failed: \[x=\[1 -2\]\]"):
        fn(params, x)


ASSERTED = {  # Assert's text of each (SummarizeValue with print_v2=false): its entries as StrCat writes them
    "bools": np.array([True, False]),
    "half": np.float16([0.1, 2.5]),
    "float32": np.float32([0.4, -0.1, 1e-45, 3e38]),
    "float64": np.float64([0.1, 1 / 3]),
    "matrix": np.float32([[1, 2], [3, 4]]),
    "cube": np.int32(np.arange(8).reshape(2, 2, 2)),
    "scalar": np.float32(0.1),
    "empty": np.zeros((2, 0), np.float32),
}


@pytest.mark.parametrize("name", list(ASSERTED))
def test_an_eager_assert_writes_its_data_as_tensorflow_does(name):
    """Red-team batch 20: an assertion's float data written with ``%g`` (``0.4``) where TensorFlow writes
    ``0.399999976``; and a matrix's entries flat where TensorFlow brackets each row up to ``summarize``."""
    value = ASSERTED[name]

    @tf.function(input_signature=[tf.TensorSpec(value.shape, tf.as_dtype(value.dtype))])
    def f(x):
        tf.debugging.Assert(False, ["msg\n", x], summarize=3)
        return tf.identity(x)

    with pytest.raises(tf.errors.InvalidArgumentError) as want:
        f(value)
    text = next(line for line in str(want.value).splitlines() if "assertion failed" in line)
    with jax.enable_x64(value.dtype == np.float64), pytest.raises(jta.errors.InvalidArgumentError) as got:
        fn, params = jta.import_function(f, value)
        fn(params, value)
    assert str(got.value).split(": ", 1)[1].startswith(text[text.index("assertion failed"):])
