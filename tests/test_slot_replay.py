"""``slots.replay`` (a loop's slot bookkeeping, all steps at once) against ``slots.update`` applied
op by op: the same bits after the loop, and the same first error (position and code)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jta._records import records, slots


def sequential(flags, events, ops):
    """``update`` op by op: the bits after, and ``(position, code, slot)`` of the first error."""
    record = records.no_error()
    first = None
    for t, row in enumerate(events):
        for e, slot in enumerate(row):
            flags, record = slots.update(flags, record, int(slot), ops[e])
            if first is None and int(record[0]):
                first = (t * len(ops) + e, int(record[0]), int(record[1]))
    return np.asarray(flags), first


def vectorised(flags, events, ops):
    flags, codes = jax.jit(slots.replay, static_argnums=2)(flags, jnp.asarray(events, jnp.int32), ops)
    codes = np.asarray(codes).reshape(-1)
    failed = np.nonzero(codes)[0]
    first = None
    if failed.size:
        p = int(failed[0])
        first = (p, int(codes[p]), int(np.asarray(events).reshape(-1)[p]))
    return np.asarray(flags), first


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5), steps=st.integers(1, 5), data=st.data())
def test_replay_is_the_ops_one_by_one(n, steps, data):
    ops = tuple(data.draw(st.lists(st.sampled_from(slots.OPS), min_size=1, max_size=3)))
    # Each slot's bits before the loop: any combination (an earlier error's sticky bits too).
    flags = jnp.asarray(data.draw(st.lists(st.integers(0, 31), min_size=n, max_size=n)), jnp.int32)
    events = data.draw(st.lists(st.lists(st.integers(0, n), min_size=len(ops), max_size=len(ops)),
                                min_size=steps, max_size=steps))  # n: no slot (out of range)
    assert_same(flags, events, ops)


def assert_same(flags, events, ops):
    want_flags, want_first = sequential(flags, events, ops)
    got_flags, got_first = vectorised(flags, events, ops)
    np.testing.assert_array_equal(got_flags, want_flags)
    assert got_first == want_first


def test_replay_examples():
    """A second write, a write after a read, a read after a clearing read; the first one wins."""
    zero = jnp.zeros((3,), jnp.int32)
    assert_same(zero, [[0], [1], [0]], ("write",))
    assert_same(zero, [[0, 0], [1, 0]], ("read", "write"))
    assert_same(zero, [[2, 2]], ("read_clear", "read_clear"))
    assert_same(zero, [[2, 1], [1, 2]], ("write", "add"))
    sticky = jnp.asarray([records.E_WRITTEN_TWICE | records.WRITTEN, 0, 0], jnp.int32)
    assert_same(sticky, [[1], [0]], ("read",))  # a plain read records nothing from the bits
    assert_same(sticky, [[1], [0]], ("add",))
