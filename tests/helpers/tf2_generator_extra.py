"""More stage families of :mod:`tests.helpers.tf2_generator` (its :data:`EXTRA_STAGES`, drawn from the seed's
second random stream), kept here so that neither module passes 700 lines.

* ``counter_write``: a TensorArray (fixed size or ``dynamic_size``) or a raw TensorList (``TensorListPushBack``)
  written under a condition on the **loop counter** (``if i < 1``, ``if i % 2 == 0``, ``if i == n - 1``,
  ``if i >= k`` with ``k`` static or an argument's), in one branch (at a separate index ``j``) or in both with
  different values, in a loop whose trip count is static, a shape or the data's; then ``stack``, ``size``,
  ``gather`` (every written row once, shuffled) or a read of the last element written;
* ``masked_rows``: ``tf.boolean_mask``, ``tf.where`` (with ``gather``/``gather_nd``) or ``tf.unique`` inside a
  loop body or inside a run-time ``tf.cond`` branch (``if tf.reduce_any(m): s = tf.boolean_mask(v, m)``, outside
  or inside a loop), followed by ops that need rows (``s[0]``, ``s[-1]``, ``s[1]``, ``tf.math.top_k(s, 2)``,
  ``softmax``, ``reduce_max``, ``reduce_mean``); the mask's count the same at every step (a mask of ``x``) or
  varying (a mask of the step's state), at least the rows the use needs;
* ``nested_growth``: an inner loop without a static bound (a ``tf.while_loop`` contraction on the data, or
  ``for j in tf.range(n)`` of the bare argument) inside an outer loop whose trip count is the data's
  (``tf.minimum(n, T)``, the bare ``n``, or a data-dependent ``break``), writing a ``dynamic_size``
  TensorArray of the outer loop's (at a running index) or its own, whose stack the outer body sums, averages or
  reads by row (``S[-1]``).

The builders take the generator's ``_Builder`` (``b``: its random stream, ``pick``, ``chance``, ``var``,
``tag``, ``parts``, ``t``, ``d``, ``n_arg``, ``dynamic``) and return a stage ``(x, n, outputs) -> x``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Stage = Callable[[Any, Any, list[Any]], Any]


def pick_trip_count(b: Any) -> str:
    """A loop's trip count: static, ``tf.shape(x)[0]`` or ``tf.minimum(n, T)`` of the argument (the data's)."""
    n_kind = b.pick("static", "shape", "arg")
    if n_kind == "arg":
        b.n_arg = True
        b.dynamic = True
    return n_kind


def trip_count(b: Any, n_kind: str, x: Any, n_in: Any) -> Any:
    tf, t = b.tf, b.t
    return t if n_kind == "static" else tf.shape(x)[0] if n_kind == "shape" else tf.minimum(n_in, t)


def counter_write(b: Any) -> Stage:
    """Writes under conditions on the loop counter (see the module docstring)."""
    tf, t, d = b.tf, b.t, b.d
    n_kind = pick_trip_count(b)
    pred = b.pick("lt1", "even", "last", "ge_k", "ge_arg")
    mode = b.pick("one", "both")
    array = b.pick("fixed", "dynamic", "push")
    known = array == "fixed" or b.chance(0.6)
    k = int(b.r.integers(1, t))  # ge_k's bound: static, 1 <= k < T
    finish = b.pick("stack", "size", "gather", "last")
    if pred == "ge_arg":
        b.n_arg = True  # if i >= n - 1 (n the argument): at least one step taken
    static_count = n_kind != "arg" and pred != "ge_arg"  # the rows written are known here (for a gather)
    count = t if mode == "both" else {"lt1": 1, "even": (t + 1) // 2, "last": 1, "ge_k": t - k}.get(pred, 0)
    if finish == "gather" and not static_count:
        finish = "last"
    if finish == "last" and mode == "one" and pred == "ge_k" and n_kind == "arg":
        finish = "stack"  # n <= k: nothing written, no last element
    rows = t if array == "fixed" else count  # a fixed array's unwritten rows gather as zeros
    picks = [int(r) for r in b.r.permutation(rows)]
    if mode == "one":
        b.dynamic = True  # a list one branch grows has a run-time length (documented: padded under a bare jit)
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    b.tag("counter_write", f"counter_write_{pred}", f"counter_write_{mode}", f"counter_write_{array}",
          f"counter_write_{finish}", f"for_{n_kind}", f"shape_{'known' if known else 'unknown'}",
          "ta_fixed" if array == "fixed" else "ta_dynamic")
    b.parts.append(f"counter_write[{pred}{' k=' + str(k) if pred == 'ge_k' else ''}, {mode}, for {n_kind}] "
                   f"{array}({'known' if known else 'unknown'} shape) -> {finish}")
    shape = [d] if known else -1

    def write(ta: Any, i: Any, v: Any) -> Any:
        if array == "push":
            return tf.raw_ops.TensorListPushBack(input_handle=ta, tensor=v)
        return ta.write(i, v)

    def take(i: Any, n: Any, n_in: Any) -> Any:
        if pred == "lt1":
            return i < 1
        if pred == "even":
            return i % 2 == 0
        if pred == "last":
            return i == n - 1
        if pred == "ge_k":
            return i >= k
        return i >= n_in - 1

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        n = trip_count(b, n_kind, x, n_in)
        if array == "push":
            ta = tf.raw_ops.EmptyTensorList(element_shape=shape, max_num_elements=-1, element_dtype=tf.float32)
        else:
            ta = tf.TensorArray(tf.float32, size=n if array == "fixed" else 0, dynamic_size=array == "dynamic",
                                element_shape=(d,) if known else None)
        j = tf.constant(0)
        h = tf.zeros([d])
        for i in tf.range(n):
            h = tf.tanh(tf.linalg.matvec(w, x[i]) + 0.5 * h)
            if mode == "one":
                if take(i, n, n_in):
                    ta = write(ta, j, h * u)
                    j += 1
            else:
                if take(i, n, n_in):
                    ta = write(ta, i, h * u)
                else:
                    ta = write(ta, i, tf.square(h) - u)
        last = j - 1 if mode == "one" else n - 1
        if array == "push":
            raw = tf.raw_ops
            if finish == "gather":
                outs.append(raw.TensorListGather(input_handle=ta, indices=picks, element_shape=shape,
                                                 element_dtype=tf.float32))
            elif finish == "last":
                outs.append(raw.TensorListGetItem(input_handle=ta, index=last, element_shape=shape,
                                                  element_dtype=tf.float32))
            else:
                outs.append(raw.TensorListStack(input_handle=ta, element_dtype=tf.float32, element_shape=shape))
                if finish == "size":
                    outs.append(raw.TensorListLength(input_handle=ta))
        elif finish == "gather":
            outs.append(ta.gather(picks))
        elif finish == "last":
            outs.append(ta.read(last))
        elif finish == "size":
            outs.extend([ta.stack(), ta.size()])
        else:
            outs.append(ta.stack())
        outs.extend([h, j])
        return x + h
    return stage


def _mask_of(b: Any, z: Any, threshold: float, at_least: int) -> Any:
    """``z > threshold``, and at least ``at_least`` entries true (``z``'s largest ones)."""
    tf = b.tf
    kth = tf.math.top_k(z, at_least).values[at_least - 1]
    return tf.logical_or(z > threshold, z >= kth)


def masked_rows(b: Any) -> Stage:
    """Ops whose rows the data decides, in loop bodies and run-time branches (see the module docstring)."""
    tf, d = b.tf, b.d
    where = b.pick("loop", "loop", "cond", "cond_in_loop")
    op = b.pick("boolean_mask", "where_gather", "where_gather_nd", "unique")
    use = b.pick("first", "last", "second", "top_k", "softmax", "max", "mean")
    if op == "where_gather_nd" and where != "loop":
        op = "where_gather"  # TensorFlow's own tape fails on gather_nd in a cond branch (IndexedSlices vs dense)
    count = "same" if where == "cond" else b.pick("same", "vary")
    outside = count == "same" and where == "loop" and b.chance(0.4)  # the mask computed before the loop
    at_least = 2 if use in ("second", "top_k") else int(b.pick(1, 2))
    n_kind = pick_trip_count(b) if where != "cond" else None
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    threshold = float(b.r.uniform(-0.4, 0.4))
    b.tag("masked_rows", f"masked_rows_{where}", f"masked_rows_{op}", f"masked_rows_{use}",
          f"masked_rows_{count}", *([f"for_{n_kind}"] if n_kind else []))
    b.parts.append(f"masked_rows[{op} -> {use}, {where}{' for ' + n_kind if n_kind else ''}, count {count}"
                   f"{' (mask before the loop)' if outside else ''}, >= {at_least}]")

    def rows(vals: Any, m: Any) -> Any:
        """The rows of ``vals`` that ``m`` keeps (1-D)."""
        if op == "boolean_mask":
            return tf.boolean_mask(vals, m)
        if op == "where_gather":
            return tf.gather(vals, tf.where(m)[:, 0])
        if op == "where_gather_nd":
            return tf.gather_nd(vals, tf.where(m))
        # tf.unique of the kept positions (-1 for the others): as many rows as m keeps, one more if any is not
        keys = tf.where(m, tf.range(tf.size(m)), -tf.ones_like(m, tf.int32))
        ids, _ = tf.unique(keys)
        return tf.gather(vals, tf.maximum(ids, 0))

    def use_of(s: Any) -> Any:
        """A scalar of ``s`` that needs its rows."""
        if use == "first":
            return s[0]
        if use == "last":
            return s[-1]
        if use == "second":
            return s[1]
        if use == "top_k":
            return tf.reduce_sum(tf.math.top_k(s, 2).values * tf.constant([1.0, 0.5]))
        if use == "softmax":
            return tf.reduce_sum(tf.nn.softmax(s) * s)
        if use == "max":
            return tf.reduce_max(s)
        return tf.reduce_mean(s)

    def value(x: Any, v: Any, h: Any, m_out: Any) -> Any:
        """The scalar a step (or the stage) gets from its masked rows."""
        vals = x[:, 0] * (1.0 + 0.1 * tf.reduce_sum(h * u)) if count == "same" else v * u
        z = x[:, 0] if count == "same" else v  # what the mask is of
        if where == "loop":
            m = m_out if m_out is not None else _mask_of(b, z, threshold, at_least)
            return use_of(rows(vals, m))
        m = z > threshold  # in a branch: its predicate guards the count
        enough = tf.reduce_any(m) if at_least == 1 else tf.reduce_sum(tf.cast(m, tf.int32)) >= at_least
        if enough:
            r = use_of(rows(vals, m))
        else:
            r = tf.reduce_mean(vals) * 0.5
        return r

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        if where == "cond":
            v = tf.linalg.matvec(w, x[0])
            r = value(x, v, v, None)
            outs.append(r)
            return x + r * u
        n = trip_count(b, n_kind, x, n_in)
        m_out = _mask_of(b, x[:, 0], threshold, at_least) if outside else None
        ta = tf.TensorArray(tf.float32, size=n, element_shape=(d,))
        h = tf.zeros([d])
        for i in tf.range(n):
            v = tf.linalg.matvec(w, x[i]) + 0.5 * h
            h = tf.tanh(v + value(x, v, h, m_out) * u)
            ta = ta.write(i, h)
        outs.extend([ta.stack(), h])
        return x + h
    return stage


def nested_growth(b: Any) -> Stage:
    """An inner loop without a static bound in an outer loop of the data's trip count (see the module
    docstring)."""
    tf, t, d = b.tf, b.t, b.d
    outer = b.pick("arg", "arg_raw", "break")
    inner = b.pick("while", "range_arg")
    owner = b.pick("outer", "own")
    use = b.pick("sum", "mean", "last") if owner == "own" else b.pick("stack", "sum")
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    eps = float(b.r.uniform(0.01, 0.1))
    threshold = float(b.r.uniform(0.2, 1.2))
    if outer != "break" or inner == "range_arg":
        b.n_arg = True
    b.dynamic = True
    b.tag("nested_growth", f"nested_growth_{outer}", f"nested_growth_{inner}", f"nested_growth_{owner}",
          f"nested_growth_{use}", "ta_dynamic", *(["for_arg"] if outer == "arg" else []),
          *(["for_arg_raw"] if outer == "arg_raw" or inner == "range_arg" else []),
          *(["break"] if outer == "break" else []), *(["while_unbounded"] if inner == "while" else []))
    b.parts.append(f"nested_growth[outer {outer}, inner {inner}, {owner}'s array -> {use}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        n_out = tf.minimum(n_in, t) if outer == "arg" else n_in if outer == "arg_raw" else t
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(d,))  # the outer loop's
        steps = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(d,))
        k = tf.constant(0)
        h = tf.zeros([d])
        shrink = tf.tanh(u)  # |tanh(u)| < 1: the inner while loop contracts to 0 and ends
        for i in tf.range(n_out):
            v = tf.abs(x[i] + 0.1 * h) + 1.0
            s = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(d,))  # its own
            if inner == "while":
                def cond(j: Any, v: Any, s: Any, acc: Any, k: Any) -> Any:
                    return tf.reduce_sum(tf.square(v)) > eps

                def body(j: Any, v: Any, s: Any, acc: Any, k: Any) -> Any:
                    v = 0.5 * tf.tanh(v) * shrink
                    if owner == "own":
                        return j + 1, v, s.write(j, v), acc, k
                    return j + 1, v, s, acc.write(k, v), k + 1
                _, v, s, acc, k = tf.while_loop(cond, body, (tf.constant(0), v, s, acc, k))
            else:
                for j in tf.range(n_in):
                    v = 0.6 * tf.tanh(v * u + x[i] * 0.3)
                    if owner == "own":
                        s = s.write(j, v)
                    else:
                        acc = acc.write(k, v)
                        k += 1
            if owner == "own":
                stacked = s.stack()
                r = tf.reduce_sum(stacked, 0) if use == "sum" else tf.reduce_mean(stacked, 0) if use == "mean" \
                    else stacked[-1]
            else:
                r = v
            h = tf.tanh(tf.linalg.matvec(w, r) + 0.5 * h)
            steps = steps.write(i, h)
            if outer == "break":
                if tf.reduce_sum(h) > threshold:
                    break
        outs.extend([steps.stack(), h])
        if owner == "outer":
            outs.extend([acc.stack()] if use == "stack" else [tf.reduce_sum(acc.stack(), 0), k])
        return x + h
    return stage


STAGES: dict[str, Callable[[Any], Stage]] = {
    "counter_write": counter_write, "masked_rows": masked_rows, "nested_growth": nested_growth}
WEIGHTS = {"counter_write": 3, "masked_rows": 3, "nested_growth": 2}
