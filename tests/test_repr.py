"""Text and HTML reprs of TensorArrays, raw_ops states and gradient registries.

The constants of jta's repr module (``jta._core.display``) are reached through ``tests.helpers.internals``;
``_repr_html_`` is the IPython display protocol, not a jta internal."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import gradients
from jta import raw_ops as ops
from tests.helpers import internals


def _ta(size=5, **kw):
    kw.setdefault("element_shape", (2,))
    return jta.TensorArray(jnp.float32, size=size, tensor_array_name="xs", **kw)


def _boxes(page: str) -> int:
    return len(re.findall(r'title="slot \d+:', page))


def _first_line(text: str) -> str:
    return text.splitlines()[0]


def test_eager_strip_and_legend():
    ta = _ta().write(0, jnp.ones(2)).write(1, jnp.ones(2))
    text = repr(ta)
    assert _first_line(text) == "TensorArray<xs>(float32, size=5, element_shape=[2]) [W W . . .]"
    assert text.splitlines()[1].strip() == internals.repr_legend()
    assert str(ta) == text


def test_read_and_cleared_slots_via_raw_ops():
    s = ops.new_state()
    s, h, f = ops.TensorArrayV3(s, 3, jnp.float32, element_shape=(), tensor_array_name="a")
    s, k, _ = ops.TensorArrayV3(s, 3, jnp.float32, element_shape=(), clear_after_read=False,
                                tensor_array_name="b")
    for handle in (h, k):
        s, _ = ops.TensorArrayWriteV3(s, handle, 0, 1.0, f)
        s, _ = ops.TensorArrayWriteV3(s, handle, 1, 2.0, f)
        s, _ = ops.TensorArrayReadV3(s, handle, 0, f, jnp.float32)
    assert _first_line(repr(s[h])).endswith("[c W .]")
    assert _first_line(repr(s[k])).endswith("[r W .]")
    assert "clear_after_read=False" in repr(s[k])


def test_recorded_errors_are_shown():
    @jax.jit
    def bad(ta, i):
        return ta.write(i, jnp.ones(2))

    out = bad(_ta(), 7)
    assert "error: InvalidArgumentError: TensorArray xs: Tried to write to index 7 but array is not " \
           "resizeable and size is: 5" in repr(out)

    twice = jax.jit(lambda ta, i: ta.write(i, jnp.ones(2)).write(i, jnp.ones(2)))(_ta(), 1)
    assert _first_line(repr(twice)).endswith("[. ! . . .]")
    assert "already been written to" in repr(twice)


def test_repr_under_jit_shows_traced():
    seen = []

    @jax.jit
    def f(ta, i):
        ta = ta.write(i, jnp.ones(2))
        seen.append(repr(ta))
        seen.append(internals.array_html(ta))
        seen.append(repr(jta.describe({"carry": ta})))
        return ta

    out = f(_ta(), 3)  # must not raise a ConcretizationTypeError
    assert _first_line(seen[0]) == "TensorArray<xs>(float32, size=5, element_shape=[2]) [traced]"
    assert len(seen[0].splitlines()) == 1  # no legend, no error line for traced arrays
    assert "slots traced" in seen[1]
    assert "traced" in seen[2]
    assert _first_line(repr(out)).endswith("[. . . W .]")


def test_repr_in_scan_body_and_vmap():
    seen = []

    def step(ta, t):
        seen.append(repr(ta))
        return ta.write(t, jnp.ones(2)), None

    jax.lax.scan(step, _ta(), jnp.arange(5))
    assert seen and all("[traced]" in s for s in seen)

    batched = jax.vmap(lambda i: _ta(size=3).write(i, jnp.ones(2)))(jnp.arange(3))
    text = repr(batched)
    assert "batch=(3,)" in text and "(batch of 3)" in text
    assert "batch[0] [W . .]" in text and "batch[2] [. . W]" in text


def test_dynamic_size_traced_and_spare_capacity():
    ta = jta.TensorArray(jnp.float32, size=2, dynamic_size=True, capacity=6, element_shape=())
    assert _first_line(repr(ta.write(0, 1.0))) == (
        "TensorArray<TensorArray>(float32, size=2, element_shape=[], capacity=6, dynamic) [W . - - - -]")
    seen = []

    @jax.jit
    def grow(ta, i):
        ta = ta.write(i, 1.0)
        seen.append(repr(ta))
        return ta

    out = grow(ta, 3)
    assert "size=traced" in seen[0]
    assert _first_line(repr(out)).endswith("size=4, element_shape=[], capacity=6, dynamic) [. . . W - -]")


def test_flags_closed_grad_checks_ragged():
    assert "closed" in repr(_ta().close())
    assert repr(_ta(checks=False)).endswith("[slots not tracked: checks=False]")
    ragged = jta.TensorArray(jnp.float32, size=3, infer_shape=False).write(0, jnp.ones(2)).write(1, jnp.ones(3))
    assert _first_line(repr(ragged)) == \
        "TensorArray<TensorArray>(float32, size=3, element_shape=<unknown>, ragged) [W W .]"
    _, g, _ = _ta().write(0, jnp.ones(2)).grad("gradients", {})
    assert _first_line(repr(g)).startswith("TensorArray<xs@gradients>(float32, size=5, element_shape=[2], grad)")


def test_long_arrays_are_truncated():
    ta = jta.TensorArray(jnp.float32, size=100, element_shape=()).scatter(np.arange(30), jnp.ones(30))
    line = _first_line(repr(ta))
    assert " ... " in line and line.endswith("(written 30, empty 70)")
    assert len(line) < 250


def test_html_strip():
    ta = _ta().write(0, jnp.ones(2))
    page = ta._repr_html_()
    assert page.startswith('<div class="jta-repr"')
    assert _boxes(page) == 5
    assert 'title="slot 0: written"' in page and 'title="slot 4: empty"' in page
    assert internals.repr_codes()["W"][1] in page  # written slots are coloured
    assert "TensorArray&lt;xs&gt;" in page  # escaped
    assert "jta-legend" in page
    errored = jax.jit(lambda ta, i: ta.write(i, jnp.ones(2)))(_ta(), 9)
    assert "error:</b> InvalidArgumentError" in errored._repr_html_()
    big = jta.TensorArray(jnp.float32, size=1000, element_shape=())
    assert _boxes(big._repr_html_()) == internals.max_slots_html()


def test_state_repr_lists_accumulators_by_source():
    s = ops.new_state()
    s, h, f = ops.TensorArrayV3(s, 3, jnp.float32, element_shape=(2,), tensor_array_name="foo")
    s, _, _ = ops.TensorArrayV3(s, 2, jnp.int32, element_shape=(), tensor_array_name="bar")
    s, f = ops.TensorArrayWriteV3(s, h, 0, jnp.ones(2), f)
    s, g, _ = ops.TensorArrayGradV3(s, h, f, "gradients")
    s, _, _ = ops.TensorArrayGradV3(s, h, f, "gradients_1")
    s, _ = ops.TensorArrayReadV3(s, g, 0, f, jnp.float32)
    text = repr(s)
    lines = text.splitlines()
    assert lines[0] == "State(2 arrays, 2 gradient accumulators, counter=2)"
    assert "'foo_0' (accumulators for sources 'gradients', 'gradients_1')" in text
    assert "'bar_1'" in text
    assert "sources: 'gradients' (1 array), 'gradients_1' (1 array)" in text
    assert re.search(r"TensorArray<foo_0@gradients>\(.*grad\) \[c \. \.\]", text)
    assert re.search(r"TensorArray<foo_0@gradients_1>\(.*grad\) \[W \. \.\]", text)
    assert lines[-1].strip() == internals.repr_legend()
    page = s._repr_html_()
    assert "<table>" in page and "gradients_1" in page and _boxes(page) == 3 + 2 + 3 + 3
    assert repr(ops.new_state()) == "State(0 arrays, 0 gradient accumulators, counter=0)"


def test_state_repr_under_jit():
    seen = []

    @jax.jit
    def f(state, i):
        state, _ = ops.TensorArrayWriteV3(state, "foo_0", i, jnp.ones(2), 0.0)
        seen.append(repr(state))
        return state

    s, _, _ = ops.TensorArrayV3(ops.new_state(), 3, jnp.float32, element_shape=(2,), tensor_array_name="foo")
    out = f(s, 1)
    assert "[traced]" in seen[0]
    assert "[. W .]" in repr(out)


def test_describe_registry_pytree_and_state():
    ta = _ta().unstack(jnp.ones((5, 2)))
    reg = gradients.read_grad({}, ta, 0, jnp.ones(2), source="gradients")
    reg = gradients.read_grad(reg, ta, 1, jnp.ones(2), source="gradients_1")
    d = jta.describe(reg)
    assert isinstance(d, internals.description_type())
    text = str(d)
    assert text.splitlines()[0] == "Registry(2 gradient accumulators)"
    assert "('xs', 'gradients'):" in text and "('xs', 'gradients_1'):" in text
    assert "<table>" in d._repr_html_()
    tree = jta.describe({"h": jnp.zeros(3), "out": ta, "grads": reg})
    assert str(tree).splitlines()[0] == "2 jta objects in a dict"
    assert "['out']:" in str(tree) and "['grads']:" in str(tree)
    assert str(jta.describe(ta)) == repr(ta)
    s = ops.new_state()
    assert str(jta.describe(s)) == repr(s)
    with pytest.raises(AttributeError):
        jta.describe(ta).missing  # noqa: B018


# -- a repr never raises --------------------------------------------------------------------------

def _views(x) -> list[str]:
    """Every view of ``x``: repr, str, ``_repr_html_``, and ``jta.describe``'s text and HTML."""
    d = jta.describe(x)
    return [repr(x), str(x), x._repr_html_(), str(d), d._repr_html_()]


def _donated():
    ta = _ta().write(0, jnp.ones(2))
    jax.jit(lambda t: t, donate_argnums=0)(ta)
    return ta


def _traced_views():
    seen = []

    @jax.jit
    def f(ta):
        seen.append(_views(ta.write(0, jnp.ones(2))))
        return ta

    f(_ta())
    return seen[0]


def _dynamic(**kw):
    return jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=3, element_shape=(),
                           tensor_array_name="xs", **kw)


def _vmapped_dynamic():
    return jax.vmap(lambda x: _dynamic().write(0, x))(jnp.arange(4.0))


def _ragged():
    return jta.TensorArray(jnp.float32, size=3, infer_shape=False, tensor_array_name="xs") \
        .write(0, jnp.ones(2)).write(1, jnp.ones(3))


def _accumulator():
    return _ta().write(0, jnp.ones(2)).grad("gradients", {})[1]


def _state():
    s, h, f = ops.TensorArrayV3(ops.new_state(), 3, jnp.float32, element_shape=(2,), tensor_array_name="xs")
    s, _ = ops.TensorArrayWriteV3(s, h, 0, jnp.ones(2), f)
    return ops.TensorArrayGradV3(s, h, f, "gradients")[0]


def _shapes(x):
    return jax.tree.map(lambda leaf: leaf.shape, x)


ODD = {
    "shape tuples": lambda: _shapes(_ta().write(0, jnp.ones(2))),
    "dtypes": lambda: jax.tree.map(lambda leaf: leaf.dtype, _ta()),
    "PartitionSpecs": lambda: jax.tree.map(lambda leaf: jax.sharding.PartitionSpec(), _ta()),
    "objects": lambda: jax.tree.map(lambda leaf: object(), _ta()),
    "Nones": lambda: jax.tree.map(lambda leaf: None, _ta()),
    "Python ints": lambda: jax.tree.map(lambda leaf: 0, _ta()),
    "traced": _traced_views,
    "donated": _donated,
    "vmap": lambda: jax.vmap(lambda i: _ta(size=3).write(i, jnp.ones(2)))(jnp.arange(3)),
    "vmap dynamic": _vmapped_dynamic,
    "shapes of vmap dynamic": lambda: _shapes(_vmapped_dynamic()),
    "eval_shape": lambda: jax.eval_shape(lambda: _ta().write(0, jnp.ones(2))),
    "eval_shape dynamic": lambda: jax.eval_shape(lambda: _dynamic().write(0, 1.0)),
    "eval_shape of vmap": lambda: jax.eval_shape(_vmapped_dynamic),
    "accumulator": _accumulator,
    "shapes of accumulator": lambda: _shapes(_accumulator()),
    "closed": lambda: _ta().close(),
    "ragged": _ragged,
    "shapes of ragged": lambda: _shapes(_ragged()),
    "checks=False": lambda: _ta(checks=False),
    "shapes of checks=False": lambda: _shapes(_ta(checks=False)),
    "dynamic checks=False": lambda: _dynamic(checks=False).write(0, 1.0),
    "state": _state,
    "shapes of state": lambda: _shapes(_state()),
    "objects of state": lambda: jax.tree.map(lambda leaf: object(), _state()),
    "eval_shape of state": lambda: jax.eval_shape(_state),
}


@pytest.mark.parametrize("case", ODD, ids=list(ODD))
def test_views_never_raise(case):
    built = ODD[case]()
    views = built if isinstance(built, list) else _views(built)
    assert len(views) == 5
    for view in views:
        assert isinstance(view, str) and "xs" in view, view
    if case == "traced":
        assert all("traced" in view for view in views)
    if case == "donated":
        assert "deleted" in views[0]


def test_views_of_shape_trees_show_the_shapes():
    text = repr(_shapes(_ta().write(0, jnp.ones(2))))
    assert text == "TensorArray<xs>(float32, size=5, element_shape=[2]) [leaves: data=(5, 2), flags=(5,), " \
                   "record=(4,), flow=()]"  # one line: no strip, no legend, no error
    assert "<i>leaves: data=(5, 2), flags=(5,)" in _shapes(_ta())._repr_html_()
    assert repr(jax.tree.map(lambda leaf: leaf.dtype, _ta())).endswith(
        "[leaves: data=float32, flags=int32, record=int32, flow=float32]")
    assert repr(jax.tree.map(lambda leaf: object(), _ta())).endswith("[leaves: data=<object>, flags=<object>, "
                                                                      "record=<object>, flow=<object>]")
    assert repr(jax.tree.map(lambda leaf: None, _ta())).endswith("[leaves: all None]")
    assert repr(_shapes(_ragged())).endswith("ragged) [leaves: data=((2,), (3,), None), record=(4,), flow=()]")
    state = repr(_shapes(_state()))
    assert "TensorArray<xs_0>(float32, size=3, element_shape=[2]) [leaves: data=(3, 2)" in state
    assert "TensorArray<xs_0@gradients>(float32, size=3, element_shape=[2], grad) [leaves: data=(3, 2)" in state


def test_views_of_abstract_and_batched_arrays_show_the_batch():
    text = repr(_vmapped_dynamic())
    assert _first_line(text) == ("TensorArray<xs>(float32, size=[1,1,1,1], element_shape=[], capacity=3, "
                                 "batch=(4,), dynamic) (batch of 4)")
    assert "batch[0] [W - -]" in text and "(1 more batch members)" in text
    assert "batch=(4,)" in _vmapped_dynamic()._repr_html_()
    abstract = repr(jax.eval_shape(_vmapped_dynamic))
    assert abstract.startswith("TensorArray<xs>(float32, size=?, element_shape=[], capacity=3, batch=(4,), dynamic)")
    assert "[leaves: data=float32[4,3], flags=int32[4,3], traced_size=int32[4]," in abstract
    assert repr(jax.eval_shape(lambda: _ta())).endswith("[leaves: data=float32[5,2], flags=int32[5], "
                                                        "record=int32[4], flow=float32[]]")


def test_unexpected_failures_fall_back_to_one_line():
    """A record no kernel writes (error code 99) makes formatting fail: the view says so."""
    def corrupt(path, leaf):
        return jnp.array([99, 0, 0, 0], jnp.int32) if jax.tree_util.keystr(path) == ".record" else leaf

    ta = jax.tree_util.tree_map_with_path(corrupt, _ta())
    line = "TensorArray<xs>(float32, size=5, element_shape=[2]) [not shown: KeyError while formatting]"
    assert repr(ta) == str(jta.describe(ta)) == line
    assert "TensorArray&lt;xs&gt;(float32, size=5, element_shape=[2]) [not shown: KeyError" in ta._repr_html_()
    state = ops.State({"xs_0": ta})
    assert repr(state) == "State [not shown: KeyError while formatting]"
    assert "State [not shown" in state._repr_html_()
