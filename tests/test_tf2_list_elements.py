"""TensorLists whose elements differ in shape or are unset, through ``jta.import_function``, against TensorFlow.

A list whose element shape is not fully known holds each element with its own shape
(``TensorArray(infer_shape=False)``, ``TensorListSplit`` into ragged pieces, and the tape's gradient
lists of a read of one piece: a ``TensorListReserve`` of the forward list's partial shape with one
element set, summed by ``AddN`` and concatenated by ``TensorListConcatV2`` with the pieces' lengths as
``leading_dims``). An unset element reads as zeros of the shape the declared one and the set ones agree
on, or of ``leading_dims``' rows in a concat, else fails with TensorFlow's text.

The enumeration: a list of 3 elements reserved with an element shape of unknown rank, ``[-1]`` or
``[3]``; some elements set (pieces of 1 or 3 values, or of shapes ``[1, 2]`` and ``[1, 3]``); optionally ``AddN`` with a second such list; then
one read (``GetItem`` of an unset and a set element, ``Stack``, ``ConcatV2`` with and without
``leading_dims``, ``PopBack``). Each program's value, or its error's class and text, must be
TensorFlow's, eagerly and under ``jax.jit``. By default every third program runs (rotating with the
test's parameters); ``--long`` runs all.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
from tensorflow.python.ops import gen_list_ops  # noqa: E402

import jta  # noqa: E402
from tests.helpers import budget  # noqa: E402

DECLARED = {"unknown_rank": -1, "partial": [-1], "full": [3]}
# index -> a piece of x (x has 4 values): [1] is x[:1], [3] is x[1:]
WRITES = {"none": {}, "one_long": {1: 3}, "ragged": {0: 1, 1: 3}, "two_long": {0: 3, 2: 3},
          "inner_differ": {0: 12, 1: 13}}  # (12: a [1, 2] piece, 13: a [1, 3] one: red-team batch 19's concat)
SECOND = {"alone": None, "plus_short_at_0": {0: 1}, "plus_long_at_1": {1: 3}}
READS = ("get_unset", "get_set", "stack", "concat", "concat_leading", "pop")
# A list of a fully known element shape keeps its elements in one buffer (an unset row is zeros of that
# shape), and TensorFlow's graph refuses pieces of another shape: no short pieces, no concat with
# leading_dims of other lengths than the declared one (TensorFlow would follow them for the unset rows; no op's
# gradient gives such, a split's gives its pieces' lengths).
CASES = [c for c in itertools.product(DECLARED, WRITES, SECOND, READS) if (c[0] != "full" or (
    c[1] in ("none", "one_long", "two_long") and c[2] != "plus_short_at_0" and c[3] != "concat_leading"))
    and (c[1] != "inner_differ" or c[0] == "unknown_rank")]  # (TensorFlow's graph refuses [1, n] in a [-1] list)
PICKED = CASES if budget.long_run() else CASES[::3]


def _build(declared: str, writes: str, second: str, read: str) -> Any:
    shape = tf.constant(DECLARED[declared], tf.int32)

    def piece(x: Any, width: int) -> Any:
        if width > 10:
            return tf.reshape(x[:2] if width == 12 else x[1:], [1, width - 10])
        return x[:1] if width == 1 else x[1:]

    def filled(x: Any, sets: dict[int, int]) -> Any:
        lst = gen_list_ops.tensor_list_reserve(element_shape=shape, num_elements=3, element_dtype=tf.float32)
        for k, width in sets.items():
            lst = gen_list_ops.tensor_list_set_item(lst, k, piece(x, width))
        return lst

    @tf.function(autograph=False)
    def f(x: Any) -> Any:
        lst = filled(x, WRITES[writes])
        if SECOND[second] is not None:
            lst = tf.raw_ops.AddN(inputs=[lst, filled(x * 2, SECOND[second])])
        set_at = [k for k in range(3) if k in WRITES[writes] or k in (SECOND[second] or {})]
        if read in ("get_unset", "get_set"):
            ks = set_at if read == "get_set" else [k for k in range(3) if k not in set_at]
            return gen_list_ops.tensor_list_get_item(lst, ks[0] if ks else 0, element_shape=shape,
                                                     element_dtype=tf.float32)
        if read == "stack":
            return gen_list_ops.tensor_list_stack(lst, element_shape=shape, element_dtype=tf.float32)
        if read == "pop":
            return gen_list_ops.tensor_list_pop_back(lst, element_shape=shape, element_dtype=tf.float32)[1]
        leading = tf.constant([1, 3, 2] if read == "concat_leading" else [], tf.int64)
        return gen_list_ops.tensor_list_concat_v2(lst, element_shape=tf.constant([-1], tf.int32), leading_dims=leading,
                                                  element_dtype=tf.float32)[0]
    return f


def _outcome(run: Any) -> tuple[str, Any]:
    """``("value", array)`` or ``("error", (its class name, its message))``."""
    try:
        return "value", np.asarray(run())
    except (tf.errors.OpError, jta.errors.TensorArrayError) as e:
        return _error(e)


def _error(e: Exception) -> tuple[str, Any]:
    """TensorFlow's kernel message is the last paragraph of a graph error, past the node it names; jta's
    follows ``Node NAME (OP): ``."""
    text = str(getattr(e, "message", e)).split("\n\n")[-1].split("\n\t [[")[0].split(" [Op:")[0]
    if text.startswith("Node ") and "): " in text:
        text = text.split("): ", 1)[1]
    return "error", (type(e).__name__, text.strip())


def outcomes(case: tuple[str, str, str, str]) -> dict[str, tuple[str, Any]]:
    """TensorFlow's outcome and jta's (imported, run eagerly and under ``jax.jit``) of one program."""
    f = _build(*case)
    x = np.asarray([1.0, 2.0, 3.0, 4.0], np.float32)
    out = {"tf": _outcome(lambda: f(x))}
    try:
        jax_fn, params = jta.import_function(f, x)
    except jta.errors.TensorArrayError as e:  # refused while importing (a static misuse)
        refused = _error(e)
        return {**out, "eager": refused, "jit": refused}
    out["eager"] = _outcome(lambda: jax_fn(params, x))
    out["jit"] = _outcome(lambda: jax.jit(jax_fn)(params, x))
    return out


@pytest.mark.long
@pytest.mark.parametrize("case", PICKED, ids=["-".join(c) for c in PICKED])
def test_elements_of_their_own_shapes(case: tuple[str, str, str, str]) -> None:
    out = outcomes(case)
    kind, want = out["tf"]
    for mode in ("eager", "jit"):
        got_kind, got = out[mode]
        assert got_kind == kind, f"{mode}: TF gives {kind} {want}, jta {got_kind} {got}"
        if kind == "value":
            np.testing.assert_array_equal(got, want, err_msg=mode)
        else:
            assert got == want, mode


if __name__ == "__main__":  # the table of every program's outcomes: python -m tests.test_tf2_list_elements
    for case in CASES:
        out = outcomes(case)
        same = all(out[m][0] == out["tf"][0] and (np.array_equal(out[m][1], out["tf"][1]) if out[m][0] == "value"
                                                  else out[m][1] == out["tf"][1]) for m in ("eager", "jit"))
        print("ok  " if same else "DIFF", "-".join(case), out["tf"], "" if same else f"jta: {out['eager']} {out['jit']}")


@pytest.mark.long_only  # (5 s; test_tf2_learned_in_loops keeps the refusal of sizes that vary by default)
def test_steps_of_other_element_shapes_in_a_loop_are_refused_not_called_misuse():
    """Red-team batch 16: a train step collecting each step's ``boolean_mask`` rows (a count the data decides)
    in a ``TensorArray(element_shape=[None])`` ran eagerly and, under ``jta.checked``, failed with TensorFlow's
    "incompatible shape" misuse text, which TensorFlow never raises there. The counts differ between the steps:
    refused as documented, naming the eager call (the rows differ between the runs of the mask)."""
    from jta._records.catalogue import Error

    w = tf.Variable(np.float32(0.8), name="w")

    @tf.function
    def train_step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                                element_shape=tf.TensorShape([None]))

            def body(i: Any, s: Any, ta: Any) -> Any:
                s = s * w + 0.3
                return i + 1, s, ta.write(i, tf.boolean_mask(s, s > 1.0))

            _, _, ta = tf.while_loop(lambda i, s, ta: tf.reduce_min(s) < 1.2, body, (0, x, ta))
            loss = tf.reduce_sum(ta.concat() ** 2)
        return loss, tape.gradient(loss, w)

    x = np.array([0.0, 0.5, 1.4, 0.9], np.float32)
    step, params = jta.import_function(train_step, x)
    for got, want in zip(step(params, x), train_step(x), strict=True):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5)
    with pytest.raises(jta.errors.UnimplementedError, match="an eager call runs any loop step by step") as info:
        jta.checked(jax.jit(step))(params, x)
    assert Error.RESULT_SIZE_LEARNED.matches(info.value)


def test_a_split_at_run_time_lengths_is_learned_by_checked():
    """Red-team batch 16: ``TensorArray.split(x, lengths)`` of argument lengths ran eagerly only; its elements'
    shapes are the lengths, which ``jta.checked`` now learns (a compilation per lengths), with TensorFlow's
    values and its error for lengths that do not add up."""
    @tf.function(input_signature=[tf.TensorSpec([9, 2], tf.float32), tf.TensorSpec([3], tf.int32)])
    def f(x: Any, lengths: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=3, infer_shape=False).split(x, lengths)
        return ta.concat() * 2, ta.read(2)

    x = np.arange(18, dtype=np.float32).reshape(9, 2)
    fn, params = jta.import_function(f, x, np.array([2, 4, 3], np.int32))
    checked = jta.checked(jax.jit(fn))
    for lengths in ([2, 4, 3], [5, 1, 3], [0, 9, 0]):
        lengths = np.array(lengths, np.int32)
        for got, want in zip(checked(params, x, lengths), f(x, lengths), strict=True):
            np.testing.assert_array_equal(np.asarray(got), want.numpy())
    bad = np.array([2, 4, 4], np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError) as tf_error:
        f(x, bad)
    with pytest.raises(jta.errors.InvalidArgumentError) as error:
        checked(params, x, bad)
    assert str(error.value).split(": ", 1)[1] in str(tf_error.value), (str(error.value), str(tf_error.value))
