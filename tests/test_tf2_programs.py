"""Random TF2 programs (:mod:`tests.helpers.tf2_generator`) through ``jta.import_function``, against TensorFlow.

Each seed's program (autograph for loops over TensorArrays with static, shape and data-dependent trip counts,
``break``, an ``if`` inside, previous-step reads, several arrays; ``tf.while_loop`` bounded or not; ``map_fn``,
``scan``, folds, nested loops, a greedy decoder; TensorArray ops outside loops; and, drawn from a second random
stream, a TensorArray written in a run-time ``if`` inside a loop, ``tf.cond``/``if``/``tf.switch_case`` whose
branches compute different intermediates, ``tf.custom_gradient``/``tf.recompute_grad``, ``tf.stop_gradient``,
``tape.stop_recording`` and ``back_prop=False``, writes under conditions on the loop counter, ``tf.boolean_mask``/
``tf.where``/``tf.unique`` in loop bodies and run-time branches, an inner loop without a static bound growing an
array inside an outer loop of the data's trip count) is checked in these ways:

* ``forward``: the imported forward eagerly (concrete arguments: loops run step by step, TensorFlow's shapes)
  and under ``jax.jit`` (a loop whose trip count the data decides: imported with ``pad_stacks=True``, the
  stack padded with zero rows past TensorFlow's);
* ``train``: the imported train step (the ``tf.GradientTape`` inside the ``tf.function``: TF's own gradient
  loops) eagerly and under ``jax.jit``, against the train step's loss and gradients;
* both again as ``jta.checked(jax.jit(fn))``, imported without ``pad_stacks``: TensorFlow's shapes exactly,
  every size the data decides (a stack's length, a list grown by a loop without a bound, a TensorArray of an
  argument's size) learned at run time;
* ``grad``: ``jax.grad`` of the imported forward's loss (the sum of squares of its float outputs) under
  ``jax.jit`` (through ``jta.checked`` where a loop has no bound or a size is the data's, the way out jit's
  refusal names), against the tape's gradients.

A phase either matches TensorFlow or is refused with a public jta error of the importer's catalogue whose
class and text are those of an entry of :data:`ALLOWED` (a construct jta refuses by documented design).
Anything else fails: a wrong value, a private exception, a refusal not listed.

Sizes (``tests/conftest.py``): :data:`SEEDS` by default, 300 under ``pytest --long``; the environment knob
``JTA_TF2_PROGRAMS=first:count`` picks the seeds; ``JTA_TF2_EXTRA=family`` gives every program a stage of that
family of the generator's ``EXTRA_STAGES`` (``JTA_TF2_EXTRA_ONLY=1``: that stage alone). A failure prints the
seed and the program;
``python -m tests.helpers.tf2_generator SEED`` prints it again.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta._records.catalogue import Error  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402
from tests.helpers import budget, tf2_generator  # noqa: E402
from tests.helpers.errors import Refused, run_phase  # noqa: E402

# By default one seed picked for breadth and speed: 147 (a scan, then an autograph loop over tf.minimum(n, T)
# of an argument with a data-dependent break over a dynamic_size float64 array, its size); --long runs
# range(0, 300) (146 among them: a while_loop bounded by a counter in its condition, then a loop over a bare
# argument n with a break, refused under jit as documented). (3, a greedy decoder then a tf.cond whose branches
# compute different intermediates, and 117, the filter idiom, run under --long; test_tf2_import tests each of
# those classes by itself.)
SEEDS: list[int] = list(range(300)) if budget.long_run() else [147]
if os.environ.get("JTA_TF2_PROGRAMS"):  # "first:count"
    _first, _count = (int(v) for v in os.environ["JTA_TF2_PROGRAMS"].split(":"))
    SEEDS = list(range(_first, _first + _count))
RTOL = 2e-4


@dataclasses.dataclass(frozen=True)
class Allowed:
    """A documented refusal: a program with one of ``tags`` (``"a+b"``: both) may be refused in ``phase``
    (``"eager"``, ``"jit"``, ``"checked"``: the runs of forward and train step; ``"grad"``: jax.grad of the
    forward) with catalogue ``code`` and a message matching ``match``."""

    tags: tuple[str, ...]
    code: int
    phase: str
    match: str
    why: str


_RAW_N = ("the loop has no static bound: a for loop over tf.range(n) of an argument n that nothing bounds "
          "(documented in docs/tf2-import.md 'Differences from TensorFlow'); eagerly and under jta.checked it runs")
ALLOWED: tuple[Allowed, ...] = (
    Allowed(("for_arg_raw",), 405, "jit", r"TensorListReserve\): the number of elements",
            f"GraphError.NOT_STATIC (405): a TensorArray of size n has no JAX shape under a bare jit: {_RAW_N}."),
    Allowed(("for_arg_raw",), 435, "jit", r"grows a TensorList",
            f"GraphError.LIST_CAPACITY (435): a dynamic_size TensorArray grown under a bare jit: {_RAW_N}."),
    Allowed(("while_unbounded",), 435, "jit", r"grows a TensorList|a list of lists is pushed",
            "GraphError.LIST_CAPACITY (435), docs/tf2-import.md 'Differences from TensorFlow': the train step's "
            "tape accumulates every step of a loop without a static bound in a list that grows, whose buffer "
            "must be sized before the loop; eagerly the loop runs step by step."),
    Allowed(("nested_growth_mean", "nested_growth_last"), 488, "jit", r"which pad_stacks=True padded with zero rows",
            "GraphError.PADDED_USE (488), docs/tf2-import.md 'Stacks of a run-time length': the padded stack may be "
            "returned [...] and summed [...]; any other use (a mean, a max, a softmax, `S[-1]`, ...) could see the "
            "zero rows and is refused (code 488), naming `jta.checked` (an inner loop's stack of the data's length "
            "averaged or read by row in the outer body; jax.grad goes through jta.checked)."),
    Allowed(("masked_rows",), 405, "jit", r"must be static \(computable from constants and shapes",
            "GraphError.NOT_STATIC (405), docs/tf2-import.md 'Shapes the values decide': tf.where(c) (and "
            "tf.boolean_mask, built on it) has as many rows as c has true entries [...] a bare jit refuses it "
            "(code 405); 'Partitions, stitches, ragged tensors': so for tf.unique [...] a bare jit refuses them "
            "naming jta.checked (code 405)."),
    *(Allowed(("nested_growth_own+nested_growth_while",), 506, phase, r"the rows differ between the runs of this op",
              "Error.RESULT_SIZE_LEARNED (506), docs/tf2-import.md 'Sizes without a static bound': the stack of an "
              "inner loop's own list inside such an outer body has one length for all the outer steps [...] where "
              "the inner loop runs a different number of steps at each outer step it is refused (code 506) under "
              "jta.checked.") for phase in ("checked", "grad")),
    *(Allowed(("masked_rows_vary+for_arg",), 506, phase, r"the rows differ between the runs of this op",
              "Error.RESULT_SIZE_LEARNED (506), docs/tf2-import.md 'Shapes the values decide': in a loop body the "
              "count may differ from step to step [...] a longer loop, or one whose trip count the data decides, "
              "is compiled once for all its steps and fails (code 506) where the steps' counts differ "
              "(jax.grad: through jta.checked, after the bare jit's 405).") for phase in ("checked", "grad")),
    *(Allowed(("grown_tensor_data_count",), 436, phase, r"a loop variable changes shape",
              "GraphError.TF2_LOOP (436), docs/tf2-import.md 'A loop variable whose shape changes': a tensor grown "
              "by tf.concat in a loop (shape_invariants) whose trip count the data decides has no lax loop; a bare "
              "jit refuses it (code 436), naming jta.checked, which learns such a count.") for phase in ("jit",)),
    *(Allowed(("grown_tensor_long",), 436, phase, r"a loop variable changes shape",
              "GraphError.TF2_LOOP (436), docs/tf2-import.md 'A loop variable whose shape changes': a tensor grown "
              "by tf.concat in a loop of a static trip count over 64 is not unrolled and is refused (code 436) "
              "but eagerly.") for phase in ("jit", "checked", "grad")),
)

_CODES = {m.code: m for m in (*GraphError, *Error)}


def catalogue_code(error: BaseException) -> int | None:
    """The catalogue code (the importer's, or jta's own: 506, a size jta.checked cannot learn) whose class and
    template ``error`` is, else ``None``."""
    matches = [m for m in (*GraphError, *Error) if m.matches(error)]
    return max(matches, key=lambda m: len(re.sub(r"\{[^}]*\}", "", m.template))).code if matches else None


def _key(v: Any) -> str:
    return v.name.removesuffix(":0")


def _close(got: Any, want: Any, what: str, pad: bool = False) -> None:
    leaves, ref = jax.tree_util.tree_leaves(got), [np.asarray(x) for x in tf.nest.flatten(want)]
    assert len(leaves) == len(ref), f"{what}: {len(leaves)} results, TF {len(ref)}"
    for k, (a, b) in enumerate(zip(leaves, ref, strict=True)):
        a = np.asarray(a)
        if pad and a.ndim and b.ndim == a.ndim and a.shape[0] > b.shape[0]:  # a padded stack: TF's rows, then zeros
            np.testing.assert_array_equal(a[b.shape[0]:], 0, err_msg=f"{what} output {k}: padding")
            a = a[:b.shape[0]]
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what} output {k}: {a.shape} {a.dtype}, TF {b.shape} {b.dtype}"
        scale = max(1.0, float(np.max(np.abs(b)))) if b.size and b.dtype.kind == "f" else 0
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * scale, err_msg=f"{what} output {k}")


def _allowed(p: tf2_generator.Program, refused: Refused) -> Allowed:
    error = refused.error
    code = catalogue_code(error)
    for entry in ALLOWED:
        if any(set(alt.split("+")) <= p.tags for alt in entry.tags) and entry.phase == refused.phase and \
                entry.code == code and re.search(entry.match, str(error), re.DOTALL):
            return entry
    kind = f"catalogue code {code}" if code is not None else "not an importer refusal of the catalogue"
    text = f"{type(error).__module__}.{type(error).__name__}: {error}"
    raise AssertionError(f"{refused.phase}: {kind}, not allowed for this program: {text[:3000]}") from error


def _loss(jax_fn: Any, args: tuple[Any, ...]) -> Any:
    def loss(params: dict[str, Any]) -> Any:
        outs = jax.tree_util.tree_leaves(jax_fn(params, *args))
        return sum(jnp.sum(jnp.square(o.astype(jnp.float32))) for o in outs if jnp.issubdtype(o.dtype, jnp.floating))
    return loss


def phases(p: tf2_generator.Program) -> list[tuple[str, Any]]:
    """The checks of one program, each ``(phase, thunk)``."""
    out: list[tuple[str, Any]] = []
    tape = p.train(*p.args)
    for kind, want in (("forward", p.forward(*p.args)), ("train", tape)):
        fn = getattr(p, kind)

        def eager(fn: Any = fn, want: Any = want, kind: str = kind) -> None:
            jax_fn, params = jta.import_function(fn, *p.args, pad_stacks=p.dynamic)
            assert sorted(params) == sorted(_key(v) for v in p.variables), (sorted(params), kind)
            _close(jax_fn(params, *p.args), want, f"{kind} eager")

        def jit(fn: Any = fn, want: Any = want, kind: str = kind) -> None:
            jax_fn, params = jta.import_function(fn, *p.args, pad_stacks=p.dynamic)
            _close(jax.block_until_ready(jax.jit(jax_fn)(params, *p.args)), want, f"{kind} jit", pad=p.dynamic)

        def checked(fn: Any = fn, want: Any = want, kind: str = kind) -> None:
            # no pad_stacks: TensorFlow's shapes, every size the data decides learned at run time
            jax_fn, params = jta.import_function(fn, *p.args)
            _close(jta.checked(jax.jit(jax_fn))(params, *p.args), want, f"{kind} jta.checked")
        out += [("eager", eager), ("jit", jit), ("checked", checked)]

    def grad() -> None:
        jax_fn, params = jta.import_function(p.forward, *p.args, pad_stacks=p.dynamic)
        g = jax.grad(_loss(jax_fn, p.args))
        try:
            grads = jax.jit(g)(params)
        except jta.errors.UnimplementedError as error:
            # the refusals whose way out is jta.checked (which learns the sizes the data decides)
            if not any(m.matches(error) for m in (Error.LOOP_NEEDS_BOUND, GraphError.LIST_CAPACITY,
                                                  GraphError.NOT_STATIC, GraphError.PADDED_USE, GraphError.TF2_LOOP)):
                raise
            grads = jta.checked(jax.jit(jax.grad(_loss(jta.import_function(p.forward, *p.args)[0], p.args))))(params)
        for v, want in zip(p.variables, tape[1], strict=True):
            np.testing.assert_allclose(grads[_key(v)], np.asarray(want), rtol=RTOL,
                                       atol=RTOL * max(1.0, float(np.max(np.abs(want)))), err_msg=f"jax.grad {_key(v)}")
    out.append(("grad", grad))
    return out


def check(p: tf2_generator.Program) -> list[tuple[str, int | None, Allowed]]:
    """Run every phase of ``p``; raise ``AssertionError`` unless each matches TF or is an allowed refusal.
    Returns the refusals (phase, code, entry)."""
    if "f64" in p.tags:  # float64 arrays are float64 in JAX only under x64 (else float32, JAX's default)
        with jax.enable_x64(True):
            return _check(p)
    return _check(p)


def _check(p: tf2_generator.Program) -> list[tuple[str, int | None, Allowed]]:
    refusals = []
    for phase, fn in phases(p):
        try:
            run_phase(phase, fn)
        except Refused as refused:
            entry = _allowed(p, refused)
            refusals.append((phase, catalogue_code(refused.error), entry))
    return refusals


@pytest.mark.long
@pytest.mark.parametrize("seed", SEEDS)
def test_program_matches_tensorflow_or_is_refused_as_documented(seed: int) -> None:
    program = tf2_generator.generate(seed)
    try:
        check(program)
    except AssertionError as failure:
        knobs = "".join(f"{k}={os.environ[k]} " for k in ("JTA_TF2_EXTRA", "JTA_TF2_EXTRA_ONLY", "JTA_TF2_KNOWN_FAILING")
                        if os.environ.get(k))
        raise AssertionError(f"seed {seed} ({knobs}python -m tests.helpers.tf2_generator {seed}): "
                             f"{program.description}\n{failure}") from None


def test_allow_list_entries_cite_a_code_of_the_catalogue() -> None:
    for entry in ALLOWED:
        assert entry.phase in ("eager", "jit", "checked", "grad") and entry.why and entry.code in _CODES, entry
        assert re.compile(entry.match).pattern


def test_generator_is_reproducible_and_covers_its_constructs() -> None:
    """The same seed gives the same program; sixty-four seeds span every stage kind."""
    a, b = tf2_generator.generate(5), tf2_generator.generate(5)
    assert a.description == b.description and a.tags == b.tags
    for x, y in zip(a.args, b.args, strict=True):
        np.testing.assert_array_equal(x, y)
    tags = set().union(*(tf2_generator.generate(s).tags for s in range(64)))
    for needle in ("for_static", "for_shape", "for_arg", "for_arg_raw", "keras", "break", "while_max_iter", "while_counter",
                   "while_unbounded", "map_fn_tuple", "scan", "nested", "decoder", "array_split_concat",
                   "ta_dynamic", "shape_unknown", "f64", "read_prev", "int_array", "cond_in_loop",
                   "branch_write", "cond_tape", "custom_grad", "stop_grad", "counter_write", "masked_rows",
                   "nested_growth", "grown_tensor"):
        assert needle in tags, needle


@pytest.mark.long_only
@pytest.mark.parametrize("seed", [33, 59])
def test_checked_phase_regressions(seed: int) -> None:
    """Classes the jta.checked phase found (seeds 30-89): a tape's list of optionals (an ``if`` in a loop
    over a bare argument) grown by an unbounded loop (59), and a gradient loop whose carried list one step
    widens by summing it with a longer list (a stack's gradient of the length jta.checked guessed, 33)."""
    program = tf2_generator.generate(seed, extras=False)  # the programs these seeds gave when the classes were found
    with jax.enable_x64("f64" in program.tags):
        for name, phase in phases(program):
            if name == "checked":  # forward and train step
                run_phase(name, phase)
