"""jta.import_graph_def: control flow v1 around conds with a run-time predicate, against Session.run.

Both branches of such a cond run and a ``Merge`` selects, so: (a) a while loop in the branch not
taken must do nothing (its bound may be garbage there; a regression hangs, so these cases run in a
subprocess with a timeout), and its effects on TensorArrays must not count; (b) a while loop inside
a cond, and its ``tf.gradients`` graph; (c) gradient graphs of a cond inside a while loop
(``tf.map_fn`` of a function with a cond, a loop whose body has one), whose stack pushes and pops
happen under the cond; nested loops whose inner loop pushes onto the gradient's stacks in every
step of an unrolled outer loop (room after the last run's values; values that differ from run to run); (d) what remains refused names the node, the construct and the way out.
Each graph runs eagerly and under ``jax.jit``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta import errors  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402


def _session(graph, fetches, feeds):
    import tensorflow as tf

    with tf.compat.v1.Session(graph=graph) as session:
        return session.run(fetches, feeds)


def _close(got, expected, tolerance=1e-5):
    for value, reference in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(value), np.asarray(reference), rtol=tolerance, atol=tolerance)


def _compare(graph, inputs, outputs, feeds_list, **options):
    """The imported graph, eagerly and under jit, against Session.run on each tuple of feeds."""
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=inputs, outputs=outputs, **options)
    jitted = jax.jit(imported)
    for feeds in feeds_list:
        expected = _session(graph, outputs, dict(zip(inputs, feeds, strict=True)))
        _close(imported(*feeds), expected)
        _close(jitted(*feeds), expected)


# -- (a) a loop in the branch not taken -------------------------------------------------------------
_RUN_IN_SUBPROCESS = textwrap.dedent("""
    import json, sys
    import numpy as np, jax, jta
    path, inputs, outputs, feeds_list = json.loads(sys.stdin.read())
    imported = jta.import_graph_def(path, inputs=inputs, outputs=outputs)
    results = []
    for feeds in feeds_list:
        arrays = [np.asarray(value, dtype) for value, dtype in feeds]
        results.append([[np.asarray(v).tolist() for v in imported(*arrays)],
                        [np.asarray(v).tolist() for v in jax.jit(imported)(*arrays)]])
    print(json.dumps(results))
""")


def _compare_in_subprocess(graph, inputs, outputs, feeds_list, tmp_path, timeout=240):
    """As :func:`_compare`, in a subprocess killed after ``timeout`` seconds: a loop that never ends
    fails the test instead of hanging it (XLA's loop does not return to Python to be interrupted)."""
    path = tmp_path / "graph.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    request = [str(path), inputs, outputs,
               [[(np.asarray(v).tolist(), np.asarray(v).dtype.str) for v in feeds] for feeds in feeds_list]]
    try:
        done = subprocess.run([sys.executable, "-c", _RUN_IN_SUBPROCESS], input=json.dumps(request),
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the imported graph did not return within {timeout} s (a loop in a branch not taken runs)")
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for feeds, (eager, jitted) in zip(feeds_list, results, strict=True):
        expected = _session(graph, outputs, dict(zip(inputs, feeds, strict=True)))
        _close(eager, expected)
        _close(jitted, expected)


@pytest.mark.long_only  # (its class is covered by lighter tests here; the full run under --long)
def test_loop_in_the_branch_not_taken_does_not_run(tmp_path):
    """A while loop (lax.while_loop: a trip count fed at run time) whose bound is 2e9 unless its
    branch is taken; a bounded one (maximum_iterations=, a masked lax.scan) beside it."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")

        def count_up():
            _, total = tf.compat.v1.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + x),
                                               [tf.constant(0), tf.zeros([3])])
            return total

        def count_up_bounded():
            _, total = tf.compat.v1.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 0.5 + x),
                                               (tf.constant(0), tf.zeros([3])), maximum_iterations=1000)
            return total

        small = n < 100
        tf.identity(tf.compat.v1.cond(small, count_up, lambda: x * 2.0), name="y")
        tf.identity(tf.compat.v1.cond(tf.logical_not(small), lambda: -x, count_up_bounded), name="z")
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    feeds = [(xv, np.int32(7)), (xv, np.int32(2_000_000_000)), (xv, np.int32(0))]
    _compare_in_subprocess(graph, ["x:0", "n:0"], ["y:0", "z:0"], feeds, tmp_path)


def test_tensor_array_written_by_a_loop_in_the_branch_not_taken():
    """A loop of static trip count (a lax.scan, run either way) writes an array created before the
    cond; where its branch is not taken, the array holds what the other branch wrote."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        array = tf.TensorArray(tf.float32, size=4, element_shape=[])

        def write_in_a_loop():
            _, written = tf.compat.v1.while_loop(
                lambda i, t: i < 4, lambda i, t: (i + 1, t.write(i, x[i] * tf.cast(i, tf.float32))), [0, array])
            return written

        result = tf.compat.v1.cond(p, write_in_a_loop, lambda: array.unstack(x + 1.0))
        tf.identity(result.stack(), name="y")
    xv = np.array([0.5, -1.0, 2.0, 3.0], np.float32)
    _compare(graph, ["x:0", "p:0"], ["y:0"], [(xv, np.bool_(True)), (xv, np.bool_(False))])


def test_tensor_array_checks_in_the_branch_not_taken_do_not_fire():
    """A read past the end and a write to an index written already, each in the branch not taken:
    TensorFlow never runs them, so no error, eagerly or under jit."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        i = tf.compat.v1.placeholder(tf.int32, [], name="i")
        array = tf.TensorArray(tf.float32, size=3, element_shape=[]).unstack(x)
        tf.identity(tf.compat.v1.cond(i < 3, lambda: array.read(i), lambda: tf.constant(-1.0)), name="y")
        written = tf.TensorArray(tf.float32, size=3, element_shape=[]).write(0, 1.0)
        written = tf.compat.v1.cond(i > 0, lambda: written.write(i, 2.0), lambda: written)
        tf.identity(written.read(0), name="z")
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    _compare(graph, ["x:0", "i:0"], ["y:0", "z:0"], [(xv, np.int32(1)), (xv, np.int32(0))])
    _compare(graph, ["x:0", "i:0"], ["y:0"], [(xv, np.int32(7))])


# -- (b) a loop inside a cond, and its gradient -------------------------------------------------
def test_while_loop_inside_a_cond_and_its_gradient():
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")

        def loop():
            _, h = tf.compat.v1.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h * x + 0.1)),
                                           [tf.constant(0), x])
            return h

        y = tf.compat.v1.cond(p, loop, lambda: x * 2.0)
        loss = tf.reduce_sum(y * y, name="loss")
        (dx,) = tf.gradients(loss, [x])
        tf.identity(dx, name="dx")
    xv = np.array([0.1, -0.4, 0.7], np.float32)
    feeds = [(xv, np.bool_(True)), (xv, np.bool_(False))]
    _compare(graph, ["x:0", "p:0"], ["loss:0"], feeds)
    _compare(graph, ["x:0", "p:0"], ["loss:0", "dx:0"], feeds)
    forward = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "p:0"], outputs=["loss:0"])
    for feed in feeds:  # JAX's gradient of the forward graph: the loop runs in a lax.cond, reversible
        expected = _session(graph, ["dx:0"], {"x:0": feed[0], "p:0": feed[1]})
        _close([jax.jit(jax.grad(lambda v, p=feed[1]: forward(v, p)[0]))(feed[0])], expected)


# -- (c) gradients of a cond inside a loop ------------------------------------------------------
def test_gradient_of_map_fn_with_a_cond():
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [5], name="x")
        y = tf.map_fn(lambda v: tf.compat.v1.cond(v > 0, lambda: v * v, lambda: tf.sin(v)), x)
        loss = tf.reduce_sum(y * x, name="loss")
        (dx,) = tf.gradients(loss, [x])
        tf.identity(dx, name="dx")
    _compare(graph, ["x:0"], ["loss:0", "dx:0"], [(np.array([0.5, -0.2, 0.3, -1.0, 2.0], np.float32),)])


def test_gradient_of_a_while_loop_with_a_cond_in_its_body():
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")

        def body(i, h):
            return i + 1, tf.compat.v1.cond(tf.reduce_sum(h) > 0, lambda: tf.tanh(h * x), lambda: h * 0.5 + x)

        _, h = tf.compat.v1.while_loop(lambda i, h: i < 4, body, [tf.constant(0), x])
        _, fed = tf.compat.v1.while_loop(lambda i, h: i < n, body, [tf.constant(0), x])  # a lax.while_loop
        tf.identity(tf.reduce_sum(h * h) + tf.reduce_sum(fed), name="loss")
        (dx,) = tf.gradients(tf.reduce_sum(h * h), [x])
        tf.identity(dx, name="dx")
        (dfed,) = tf.gradients(tf.reduce_sum(fed * fed), [x])
        tf.identity(dfed, name="dfed")
    feeds = [(np.array([0.5, -0.2, 0.3], np.float32), np.int32(3)),
             (np.array([-0.5, -0.2, 0.3], np.float32), np.int32(5))]
    _compare(graph, ["x:0", "n:0"], ["loss:0", "dx:0"], feeds)
    _compare(graph, ["x:0", "n:0"], ["dfed:0"], feeds, stack_capacity=16)


# -- nested loops: an inner loop's stacks pushed again in each step of an unrolled outer loop ----
@pytest.mark.long_only  # (4 s; test_graph_map_fn keeps map_fn's gradients by default)
def test_gradient_of_map_fn_over_a_recurrent_loop():
    """``tf.map_fn`` whose function runs an RNN-like while loop over TensorArrays: the inner forward
    loop pushes onto the gradient's stacks once per outer step (the outer loop is unrolled), so each
    run must find room after the previous run's values, and the inner gradient pops them back."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3, 4, 2], name="x")

        def recurrent(sequence):
            inputs = tf.TensorArray(tf.float32, size=4, element_shape=[2]).unstack(sequence)
            outputs = tf.TensorArray(tf.float32, size=4, element_shape=[2])

            def step(t, h, written):
                h = tf.tanh(inputs.read(t) + h * 0.5)
                return t + 1, h, written.write(t, h)

            _, _, written = tf.compat.v1.while_loop(lambda t, h, o: t < 4, step, [0, tf.zeros([2]), outputs])
            return written.stack()

        y = tf.map_fn(recurrent, x)
        loss = tf.reduce_sum(y * y, name="loss")
        (dx,) = tf.gradients(loss, [x])
        tf.identity(dx, name="dx")
    _compare(graph, ["x:0"], ["loss:0", "dx:0"], [(np.arange(24, dtype=np.float32).reshape(3, 4, 2) / 24,)])


def test_gradient_of_nested_loops_whose_inner_count_depends_on_the_outer_step():
    """The outer loop is unrolled (the inner trip count, i + 1, changes with its step); the inner loop
    pushes its TensorArray read index for the gradient: a single static 0 in the first step, a
    traced index later, so the stack cannot be one static value."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3, 3], name="x")

        def outer(i, total):
            row = tf.TensorArray(tf.float32, size=3, element_shape=[]).unstack(x[i])
            _, total = tf.compat.v1.while_loop(lambda j, s: j < i + 1,
                                               lambda j, s: (j + 1, s + tf.sin(row.read(j)) * s), [0, total])
            return i + 1, total

        _, total = tf.compat.v1.while_loop(lambda i, t: i < 3, outer, [tf.constant(0), tf.constant(1.0)])
        tf.identity(total, name="loss")
        (dx,) = tf.gradients(total, [x])
        tf.identity(dx, name="dx")
    _compare(graph, ["x:0"], ["loss:0", "dx:0"], [(np.arange(9, dtype=np.float32).reshape(3, 3) / 9,)])


# -- (d) what remains refused -------------------------------------------------------------------
def test_array_whose_structure_changes_under_a_run_time_cond_is_refused():
    """An array created without an element shape whose first write happens in one branch: the two
    branches leave it with different static structure (no element shape, or one)."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        array = tf.TensorArray(tf.float32, size=2, infer_shape=False)
        flow = tf.compat.v1.cond(p, lambda: array.write(0, x).flow, lambda: array.flow)
        tf.identity(flow, name="flow")
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "p:0"], outputs=["flow:0"])
    with pytest.raises(errors.UnimplementedError, match=r"Node cond/TensorArrayWrite/TensorArrayWriteV3 "
                       r"\(TensorArrayWriteV3\): it sits in a cond branch.*element_shape="):
        jax.jit(imported)(np.ones(3, np.float32), np.bool_(True))


def _growing_array_in_a_branch():
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        array = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[3])

        def grow():
            _, grown = tf.compat.v1.while_loop(lambda i, t: i < 3,
                                               lambda i, t: (i + 1, t.write(i, x * tf.cast(i, tf.float32))),
                                               [0, array])
            return grown

        result = tf.compat.v1.cond(p, grow, lambda: array)
        tf.identity(result.size(), name="y")  # its stack's shape would depend on p
    return graph


def test_loop_growing_an_array_in_a_run_time_branch_needs_a_capacity():
    """Without a capacity the growing array makes the loop unrolled, whose growth cannot be undone
    where the branch is not taken: refused, naming the loop and the way out; with one it runs."""
    graph = _growing_array_in_a_branch()
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "p:0"], outputs=["y:0"])
    with pytest.raises(errors.UnimplementedError, match=r"While loop cond/while/while_context: it sits in a cond "
                       r"branch.*dynamic_size array grows.*tensor_array_capacity="):
        jax.jit(imported)(xv, np.bool_(True))
    _compare(graph, ["x:0", "p:0"], ["y:0"], [(xv, np.bool_(True)), (xv, np.bool_(False))], tensor_array_capacity=8)


# -- (e) loops whose carry changes structure: run step by step eagerly, refused under jit ----------
def _fed_length_graph():
    """A ``dynamic_size`` array of unknown element shape that a loop grows to a fed length ``n`` (one
    write per step), read back with stack(), gather() and size(), and the gradient of stack()."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        array = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=None, clear_after_read=False)
        _, array = tf.compat.v1.while_loop(
            lambda i, t: i < n, lambda i, t: (i + 1, t.write(i, tf.sin(x * tf.cast(i + 1, tf.float32)))), [0, array])
        stacked = tf.identity(array.stack(), name="stacked")
        tf.identity(array.gather([0, 1]), name="first_two")
        tf.identity(array.size(), name="size")
        loss = tf.reduce_sum(stacked * stacked, name="loss")
        (dx,) = tf.gradients(loss, [x])
        tf.identity(dx, name="dx")
        (dfirst,) = tf.gradients(tf.reduce_sum(array.gather([0, 1]) ** 2), [x])
        tf.identity(dfirst, name="dfirst")
    return graph


@pytest.mark.long_only  # (4 s; the graph corpus's dynamic arrays keep the class)
def test_array_grown_to_a_fed_length():
    """Eagerly the fed length is known (as to TensorFlow): stack(), its gradient and jax.grad of the
    forward graph match Session.run without any option. Under jit the loop is a lax.while_loop: refused
    without tensor_array_capacity= (naming the loop, the array and both ways out); with it, gather()
    and size() run, and stack(), whose shape is known at run time only, is refused naming its node."""
    graph = _fed_length_graph()
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    inputs = ["x:0", "n:0"]
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=inputs, outputs=["stacked:0", "size:0", "dx:0"])
    forward = jta.import_graph_def(graph.as_graph_def(), inputs=inputs, outputs=["loss:0"])
    for n in (3, 5):
        expected = _session(graph, ["stacked:0", "size:0", "dx:0"], {"x:0": xv, "n:0": n})
        _close(imported(xv, np.int32(n)), expected)
        _close([jax.grad(lambda v, n=n: forward(v, np.int32(n))[0])(xv)], expected[2:])
    with pytest.raises(errors.UnimplementedError, match=r"While loop while/while_context: the loop body changes the "
                       r"structure of its carry \(the array of TensorArrayV3 node TensorArray is dynamic_size and "
                       r"needs a static capacity.*through jta.checked.*pass tensor_array_capacity=N.*outside jax.jit"):
        jax.jit(imported)(xv, np.int32(3))
    options = {"tensor_array_capacity": 8, "stack_capacity": 8}
    _compare(graph, inputs, ["first_two:0", "size:0", "dfirst:0"], [(xv, np.int32(3)), (xv, np.int32(6))], **options)
    capped = jta.import_graph_def(graph.as_graph_def(), inputs=inputs, outputs=["stacked:0"], **options)
    with pytest.raises(errors.UnimplementedError, match=r"Node TensorArrayStack/range \(Range\): .*the size of the "
                       r"array of TensorArrayV3 node TensorArray, which a while loop sets at run time.*through "
                       r"jta.checked.*outside jax.jit"):
        jax.jit(capped)(xv, np.int32(3))


@pytest.mark.long_only  # (its class is covered by lighter tests here; the full run under --long)
def test_array_grown_to_a_fed_length_under_jta_checked():
    """The way out both refusals above name: jta.checked learns the array's capacity (a first buffer, then
    doubled when a run of 300 steps outgrows it) and the size stack() returns, so stack(), size(), TF's
    gradient graph and jax.grad of the forward graph match Session.run with no option, and a size seen
    before compiles nothing."""
    graph = _fed_length_graph()
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    inputs, outputs = ["x:0", "n:0"], ["stacked:0", "size:0", "dx:0"]
    traces = []
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=inputs, outputs=outputs)
    running = [0]  # (the n of the call that traces)
    checked = jta.checked(lambda *a: traces.append(running[0]) or imported(*a))
    forward = jta.import_graph_def(graph.as_graph_def(), inputs=inputs, outputs=["loss:0"])
    grad = jta.checked(jax.grad(lambda v, n: forward(v, n)[0]))
    for n in (3, 5, 300, 3):
        running[0] = n
        expected = _session(graph, outputs, {"x:0": xv, "n:0": n})
        _close(checked(xv, np.int32(n)), expected)
        _close([grad(xv, np.int32(n))], expected[2:])
    # 3: three traces (a first finds a write at a traced index, a buffer; the next two learn what its runs
    # report); 5: one (its size); 300: two (the buffer doubles, then its size); 3 again: one (its size with
    # the grown buffer).
    assert traces == [3, 3, 3, 5, 300, 300, 3]
    capped = jta.import_graph_def(graph.as_graph_def(), inputs=inputs, outputs=outputs, tensor_array_capacity=8)
    _close(jta.checked(capped)(xv, np.int32(6)), _session(graph, outputs, {"x:0": xv, "n:0": 6}))


def test_loops_whose_carry_changes_run_step_by_step_eagerly():
    """A data-dependent trip count growing an array, a variable that grows (shape_invariants) and
    ragged writes (a slice bounded by the counter): eagerly each runs step by step and matches
    Session.run; under jit each is refused naming what to do."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[3])
        _, _, grown = tf.compat.v1.while_loop(lambda i, h, t: tf.reduce_sum(h) < 10.0,
                                              lambda i, h, t: (i + 1, h + tf.abs(x) + 0.1, t.write(i, h)),
                                              [0, x, grown])
        tf.identity(grown.stack(), name="grown")
        _, acc = tf.compat.v1.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, tf.concat([a, a[-1:] * 2.0], 0)),
                                         [0, x], shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
        tf.identity(acc, name="acc")
        ragged = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
        _, ragged = tf.compat.v1.while_loop(lambda i, t: i < n, lambda i, t: (i + 1, t.write(i, x[: i + 1])),
                                            [0, ragged])
        tf.identity(ragged.concat(), name="ragged")
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    outputs = ["grown:0", "acc:0", "ragged:0"]
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "n:0"], outputs=outputs)
    for n in (2, 3):
        _close(imported(xv, np.int32(n)), _session(graph, outputs, {"x:0": xv, "n:0": n}))
    for output, message in (("grown:0", r"dynamic_size and needs a static capacity.*tensor_array_capacity="),
                            ("acc:0", r"a loop variable changes shape from \(3,\) to \(4,\) \(shape invariants are "
                                      r"supported only outside jax.jit"),
                            ("ragged:0", r"Node while_2/strided_slice \(StridedSlice\): slice bounds \(the slice's length is "
                                         r"its shape; jta.checked learns it at run time\) \(here in a "
                                         r"while loop traced as a lax loop: call the imported function outside "
                                         r"jax.jit")):
        one = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "n:0"], outputs=[output])
        with pytest.raises(errors.UnimplementedError, match=message):
            jax.jit(one)(xv, np.int32(2))


def test_array_sized_by_a_fed_value():
    """``TensorArray(size=n)`` with ``n`` fed: eagerly as TensorFlow; under jit its buffer's shape would
    depend on ``n``: refused naming the node and the ways out."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        array = tf.TensorArray(tf.float32, size=n, element_shape=[3])
        _, array = tf.compat.v1.while_loop(lambda i, t: i < n, lambda i, t: (i + 1, t.write(i, x * tf.cast(i, tf.float32))),
                                           [0, array])
        tf.identity(array.stack(), name="y")
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "n:0"], outputs=["y:0"])
    _close(imported(xv, np.int32(4)), _session(graph, ["y:0"], {"x:0": xv, "n:0": 4}))
    with pytest.raises(errors.UnimplementedError, match=r"Node TensorArray \(TensorArrayV3\): the size \(here a value "
                       r"known at run time only: call the imported function outside jax.jit"):
        jax.jit(imported)(xv, np.int32(4))


@pytest.mark.long_only  # (its class is covered by lighter tests here; the full run under --long)
def test_raw_rnn_until_every_sequence_finished_under_jta_checked():
    """``tf.compat.v1.nn.raw_rnn``: a loop that stops when every sequence of the batch has finished (fed
    lengths), emitting into a ``dynamic_size`` array with no capacity anywhere. Through jta.checked its
    outputs, TF's gradient graph (variables frozen to constants) and jax.grad of the forward graph
    match Session.run."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    steps, batch, width, hidden = 6, 2, 3, 4
    xs = rng.standard_normal((steps, batch, width)).astype(np.float32)
    lengths = np.array([4, 6], np.int32)
    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [steps, batch, width], name="x")
        length = tf.compat.v1.placeholder(tf.int32, [batch], name="length")
        inputs = tf.TensorArray(tf.float32, size=steps).unstack(x)
        w = tf.constant(rng.standard_normal((width + hidden, hidden)).astype(np.float32) * 0.5, name="w")

        class Cell:
            output_size = state_size = hidden

            def __call__(self, inp, state, scope=None):
                h = tf.tanh(tf.matmul(tf.concat([inp, state], 1), w))
                return h, h

            def zero_state(self, size, dtype):
                return tf.zeros([size, hidden], dtype)

        def loop_fn(time, cell_output, cell_state, loop_state):
            state = tf.zeros([batch, hidden]) if cell_output is None else cell_state
            finished = time >= length
            nxt = tf.cond(tf.reduce_all(finished), lambda: tf.zeros([batch, width]),
                          lambda: inputs.read(tf.minimum(time, steps - 1)))
            return finished, nxt, state, cell_output, None

        emitted, _, _ = tf.compat.v1.nn.raw_rnn(Cell(), loop_fn)
        out = tf.identity(emitted.stack(), name="out")
        loss = tf.reduce_sum(out ** 2, name="loss")
        grads = [tf.identity(g, name=f"d{i}") for i, g in enumerate(tf.gradients(loss, [x, w]))]
    outputs = ["out:0", "loss:0", *(g.name for g in grads)]
    expected = _session(graph, outputs, {"x:0": xs, "length:0": lengths})
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "length:0"], outputs=outputs)
    _close(jta.checked(imported)(xs, lengths), expected)
    forward = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0", "length:0"], outputs=["loss:0"])
    _close([jta.checked(jax.grad(lambda a, n: forward(a, n)[0]))(xs, lengths)], expected[2:3])


def test_a_where_in_a_short_loop_learns_a_count_per_step():
    """A ``tf.boolean_mask`` in a ``tf.while_loop`` of 3 steps (control flow v1), its count different in each
    step: under ``jta.checked`` the loop is unrolled, so each step learns its own count; the values and the
    ``tf.gradients`` graph match Session.run."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3, 4], name="x")

        def body(i, acc):
            y = tf.gather(x, i)
            return i + 1, acc + tf.reduce_sum(tf.boolean_mask(y, y > 0) ** 2)

        _, total = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), tf.constant(0.0)])
        tf.identity(total, name="total")
        tf.identity(tf.convert_to_tensor(tf.gradients(total, [x])[0]), name="dx")
    xv = np.array([[1.0, -2.0, 3.0, 0.5], [-1.0, -2.0, 0.25, -0.5], [2.0, 2.0, 2.0, -1.0]], np.float32)
    outputs = ["total:0", "dx:0"]
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=["x:0"], outputs=outputs)
    _close(jta.checked(jax.jit(imported))(xv), _session(graph, outputs, {"x:0": xv}))
