"""The ``grown_tensor`` stage family of :mod:`tests.helpers.tf2_generator` (its :data:`EXTRA_STAGES`): a
**tensor (not a TensorArray) that grows in a loop**, as TF2 users write a KV cache or a list of rows.

* the loop: ``tf.while_loop(..., shape_invariants=[..., tf.TensorShape([None, d])])``, or autograph (``for i in
  tf.range(n)``, ``while``) with ``tf.autograph.experimental.set_loop_options(shape_invariants=[(buf,
  tf.TensorShape([None, d]))])`` as the body's first statement;
* the growth: ``buf = tf.concat([buf, row[None]], 0)`` (``rows``), along axis 1 (``cols``: ``[d, None]``), two
  buffers of different ranks (``two``: rows and a vector of per-step scalars), or a KV cache read by an
  attention step (``kv``: ``K``, ``V`` grown by a row each, then ``softmax(q @ tf.transpose(K)) @ V``);
  the buffers start empty (``tf.zeros([0, d])``) or with one row;
* the trip count: static (``static``: at most 64; ``long``: more than 64), ``tf.shape(x)[0]`` (``shape``),
  an argument ``n`` (``arg``: ``tf.minimum(n, T)``; ``arg_raw``: the bare ``n``), a data-dependent exit
  (``data``: ``while tf.reduce_max(s) < c``, ``s`` a running sum that grows by at least 0.025 a step;
  ``break``: an autograph ``for`` with ``if tf.reduce_max(s) > c: break``), or such an exit bounded by
  ``maximum_iterations=`` (``max_iter``; autograph: ``set_loop_options(maximum_iterations=)``). Every kind
  runs at least one step and, but ``long``, at most 64;
* then the stage uses the grown tensor: ``reduce_sum``, ``buf[-1]``, ``tf.reduce_mean(buf, 0)``, a matmul with
  it (its Gram matrix, of a static shape), or returns it; and its number of rows (``tf.shape``).

What jta does (docs/tf2-import.md, "A loop variable whose shape changes"): the loop is unrolled where its trip
count is static and at most 64, runs step by step eagerly, is unrolled to the count ``jta.checked`` learned
where the data decides a count of at most 64 (a compile per count), and is refused otherwise (code 436: a bare
jit of the data's count, a static count over 64 but eagerly). The tags say which: ``grown_tensor_static_count`` (unrolled), ``grown_tensor_long`` (a static count over 64),
``grown_tensor_data_count`` (the data's count: ``arg``, ``arg_raw``, ``data``, ``break``, ``max_iter``).
"""

from __future__ import annotations

from typing import Any

from .tf2_generator_extra import Stage

DATA_COUNTS = ("arg", "arg_raw", "data", "break", "max_iter")


def grown_tensor(b: Any) -> Stage:
    """A tensor grown by ``tf.concat`` in a loop whose loop variable changes shape (see the module docstring)."""
    tf, t, d = b.tf, b.t, b.d
    form = b.pick("while_loop", "autograph")
    growth = b.pick("rows", "rows", "cols", "two", "kv")
    count = b.pick("static", "static", "long", "shape", "arg", "arg_raw", "data", "break", "max_iter")
    if count == "break" and form == "while_loop":
        count = "data"  # a break is autograph's; tf.while_loop says it in its condition
    use = b.pick("sum", "last", "mean", "matmul", "self")
    start = b.pick("empty", "row")
    steps = {"static": int(b.pick(t, int(b.r.integers(7, 65)))), "long": int(b.r.integers(65, 81))}.get(count, t)
    bound = int(b.r.integers(t, 41))  # break's for loop: tf.range(bound)
    max_iter = int(b.r.integers(1, 12))
    c = float(b.r.uniform(0.2, 1.5))  # the exit's threshold: s grows by >= rate a step, so <= 60 steps
    rate = float(b.pick(0.05, 0.025))
    if count in ("arg", "arg_raw"):
        b.n_arg = True
    if count in DATA_COUNTS:
        b.dynamic = True
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    wq, wk = (b.var("wq", (d, d)), b.var("wk", (d, d))) if growth == "kv" else (None, None)
    kind = "data_count" if count in DATA_COUNTS else "long" if count == "long" else "static_count"
    b.tag("grown_tensor", f"grown_tensor_{form}", f"grown_tensor_{growth}", f"grown_tensor_{count}",
          f"grown_tensor_{use}", f"grown_tensor_{kind}")
    what = {"static": f"static {steps}", "long": f"static {steps}", "break": f"break (range {bound})",
            "max_iter": f"max_iter {max_iter}"}.get(count, count)
    b.parts.append(f"grown_tensor[{form}, {growth} from {start}, count {what}"
                   f"{f' c={c:.2f} rate {rate}' if count in ('data', 'break', 'max_iter') else ''}] -> {use}")

    def count_of(x: Any, n_in: Any) -> Any:
        """The loop's trip count (its kinds of a counter)."""
        return steps if count in ("static", "long") else tf.shape(x)[0] if count == "shape" else \
            tf.minimum(n_in, t) if count == "arg" else n_in

    def empty(x: Any) -> list[Any]:
        """The buffers before the loop: empty or one row."""
        first = x[0] * u
        if growth == "cols":
            return [tf.zeros([d, 0]) if start == "empty" else first[:, None]]
        bufs = [tf.zeros([0, d]) if start == "empty" else first[None]]
        if growth == "two":
            bufs.append(tf.zeros([0]) if start == "empty" else tf.reduce_sum(first)[None])
        elif growth == "kv":
            bufs.append(tf.zeros([0, d]) if start == "empty" else tf.tanh(first)[None])
        return bufs

    def invariants() -> list[Any]:
        if growth == "cols":
            return [tf.TensorShape([d, None])]
        if growth == "two":
            return [tf.TensorShape([None, d]), tf.TensorShape([None])]
        return [tf.TensorShape([None, d])] * (2 if growth == "kv" else 1)

    def step(x: Any, i: Any, h: Any, s: Any, bufs: list[Any]) -> tuple[Any, Any, list[Any]]:
        """One step: the state ``h``, the exit's running sum ``s``, the buffers grown by a row each."""
        xi = x[i % t]
        if growth == "kv":
            k_buf, v_buf = bufs
            k_buf = tf.concat([k_buf, tf.linalg.matvec(wk, h + xi)[None]], 0)
            v_buf = tf.concat([v_buf, tf.tanh(h * u + xi)[None]], 0)
            q = tf.linalg.matvec(wq, h + xi)[None]  # [1, d]
            att = tf.nn.softmax(tf.matmul(q, tf.transpose(k_buf)))  # [1, rows]
            ctx = tf.matmul(att, v_buf)[0]
            h = tf.tanh(tf.linalg.matvec(w, xi) + 0.5 * h + ctx)
            bufs = [k_buf, v_buf]
        else:
            h = tf.tanh(tf.linalg.matvec(w, xi) + 0.5 * h)
            row = h * u
            if growth == "cols":
                bufs = [tf.concat([bufs[0], row[:, None]], 1)]
            elif growth == "two":
                bufs = [tf.concat([bufs[0], row[None]], 0), tf.concat([bufs[1], tf.reduce_sum(row)[None]], 0)]
            else:
                bufs = [tf.concat([bufs[0], row[None]], 0)]
        s = s + 0.1 * tf.abs(h) + rate
        return h, s, bufs

    def use_of(buf: Any) -> Any:
        """What the stage makes of a grown buffer (rows along axis 0, or 1 for ``cols``)."""
        axis = 1 if growth == "cols" else 0
        if use == "sum":
            return tf.reduce_sum(buf, axis)
        if use == "last":
            return buf[:, -1] if axis else buf[-1]
        if use == "mean":
            return tf.reduce_mean(buf, axis)
        if use == "matmul":
            if buf.shape.rank == 1:
                return tf.reduce_sum(buf * buf)
            return tf.matmul(buf, buf, transpose_a=not axis, transpose_b=bool(axis))  # [d, d]
        return buf

    def stage_while(x: Any, n_in: Any) -> tuple[Any, list[Any]]:
        n = None if count in ("data", "max_iter") else count_of(x, n_in)
        h0, s0 = tf.zeros([d]), tf.zeros([d])

        def cond(i: Any, h: Any, s: Any, *bufs: Any) -> Any:
            return tf.reduce_max(s) < c if n is None else i < n

        def body(i: Any, h: Any, s: Any, *bufs: Any) -> Any:
            h, s, grown = step(x, i, h, s, list(bufs))
            return (i + 1, h, s, *grown)

        shapes = [tf.TensorShape([]), tf.TensorShape([d]), tf.TensorShape([d]), *invariants()]
        out = tf.while_loop(cond, body, (tf.constant(0), h0, s0, *empty(x)), shape_invariants=tuple(shapes),
                            maximum_iterations=max_iter if count == "max_iter" else None)
        return out[1], list(out[3:])

    def stage_autograph(x: Any, n_in: Any) -> tuple[Any, list[Any]]:
        h, s = tf.zeros([d]), tf.zeros([d])
        bufs = empty(x)
        buf0 = bufs[0]
        buf1 = bufs[1] if len(bufs) > 1 else tf.zeros([0])
        two = len(bufs) > 1
        inv = invariants()
        if count in ("data", "max_iter"):
            i = tf.constant(0)
            while tf.reduce_max(s) < c:
                tf.autograph.experimental.set_loop_options(  # the first statement, as autograph requires
                    maximum_iterations=max_iter if count == "max_iter" else None,
                    shape_invariants=[(buf0, inv[0]), (buf1, inv[-1] if two else tf.TensorShape([None]))])
                h, s, grown = step(x, i, h, s, [buf0, buf1][:len(bufs)])
                buf0 = grown[0]
                if two:
                    buf1 = grown[1]
                i += 1
        elif count == "break":  # a loop of its own: autograph gives every loop with a break a flag in its condition
            for i in tf.range(bound):
                tf.autograph.experimental.set_loop_options(
                    shape_invariants=[(buf0, inv[0]), (buf1, inv[-1] if two else tf.TensorShape([None]))])
                h, s, grown = step(x, i, h, s, [buf0, buf1][:len(bufs)])
                buf0 = grown[0]
                if two:
                    buf1 = grown[1]
                if tf.reduce_max(s) > c:
                    break
        else:
            for i in tf.range(count_of(x, n_in)):
                tf.autograph.experimental.set_loop_options(
                    shape_invariants=[(buf0, inv[0]), (buf1, inv[-1] if two else tf.TensorShape([None]))])
                h, s, grown = step(x, i, h, s, [buf0, buf1][:len(bufs)])
                buf0 = grown[0]
                if two:
                    buf1 = grown[1]
        return h, [buf0, buf1][:len(bufs)]

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        h, bufs = stage_while(x, n_in) if form == "while_loop" else stage_autograph(x, n_in)
        outs.extend(use_of(buf) for buf in bufs)
        outs.extend([tf.shape(bufs[0])[1 if growth == "cols" else 0], h])  # its rows: the trip count's
        return x + h
    return stage


STAGES = {"grown_tensor": grown_tensor}
