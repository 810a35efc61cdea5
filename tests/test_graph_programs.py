"""Random TF1 programs (:mod:`tests.helpers.tf1_programs`) through ``jta.import_graph_def``, against Session.run.

Each seed's program (map_fn, scan, folds, while loops over TensorArrays, conds around and inside loops,
nested loops, RNNs with duck-typed or TF1 legacy cells, greedy decoders, jacobians, each with
``tf.gradients``) is imported and run eagerly and under ``jax.jit`` (values, side outputs and TF's own
gradient graph), and ``jax.grad`` of the imported forward loss is compared with TF's gradients. Each phase
either matches Session.run or is refused with a public jta error of the importer's catalogue (codes 401-421)
whose text names a node or loop of the graph, for a construct of :data:`ALLOWED` (each entry cites its code,
the construct and where it is documented). Anything else fails: a wrong value, a private exception
(``KeyError``, ``TypeError``, ``AttributeError`` from inside), a refusal not listed.

Sizes (``tests/conftest.py``): one seed by default (:data:`SEEDS`), 300 under ``pytest --long``; the
environment knob ``JTA_GRAPH_PROGRAMS=first:count`` picks the seeds. A failure prints the seed and the
program; ``python -m tests.helpers.tf1_programs SEED`` rebuilds it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta._records.catalogue import Error  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402
from tests.helpers import budget, tf1_programs  # noqa: E402
from tests.helpers.errors import Refused, run_phase  # noqa: E402

# By default one seed picked for breadth (a loop with a fed count and maximum_iterations= around a loop over an
# array of unknown element shape with a cond inside, map_fn with fn_output_signature, a constant cond around a
# greedy decoder and a value-bounded loop; ~5 s; the RNN cells are in tests/test_graph_legacy_cells.py);
# --long runs range(0, 300) (about 25 minutes on 2 cores).
SEEDS: list[int] = list(range(300)) if budget.long_run() else [19]
if os.environ.get("JTA_GRAPH_PROGRAMS"):  # "first:count"
    _first, _count = (int(v) for v in os.environ["JTA_GRAPH_PROGRAMS"].split(":"))
    SEEDS = list(range(_first, _first + _count))
SECONDS_PER_PROGRAM = 300  # a program still running after this is a hang (checked where Python runs)


@dataclasses.dataclass(frozen=True)
class Allowed:
    """A documented refusal: a program with one of ``tags`` (``"a+b"``: both ``a`` and ``b``) may fail in
    ``phase`` with catalogue ``code`` (``None``: JAX's own error for a documented limit) and a message matching
    ``match``. Entries citing a finding (Fn, the fuzz sweep's) are to go when the finding is fixed."""

    tags: tuple[str, ...]
    code: int | None
    phase: str  # "import" (eager run, jit run: the importer traces the graph), "grad" (jax.grad of the forward)
    match: str
    why: str


ALLOWED: tuple[Allowed, ...] = (
    Allowed(("cond_around_cond", "cond_around_case"), 420, "import", r"changes the static structure",
            "GraphError.GUARDED_LOOP (420), documented in docs/graph-import.md 'Control flow': a loop in a "
            "run-time cond branch that is unrolled (a TensorArray of unknown element shape, dynamic_size) and "
            "changes a TensorArray's or stack's structure that exists outside the branch (finding F12)."),
    Allowed(("while_triangular+while_fed_max_iter", "while_triangular+while_fed_min"), 406, "import",
            r"whose trip count is not static here; pass stack_capacity=",
            "GraphError.STACK_CAPACITY (406), documented in docs/graph-import.md 'Loops': a loop whose inner "
            "trip count is its step is unrolled only when its own trip count is static; with a fed count (bounded "
            "by maximum_iterations=) its inner loop's stacks ask for stack_capacity= (finding F15)."),
    Allowed(("embedding_fed+cond_around_cond", "embedding_fed+cond_around_case"), 409, "import",
            r"Switch_grad/cond_grad/Merge: a Merge of shapes",
            "GraphError.MERGE_SHAPES (409): the gradient of a Gather (embedding_lookup) of a fed table in a "
            "cond branch on a run-time predicate merges the branch's IndexedSlices with the other branch's zeros, "
            "of another shape (finding F11)."),
    Allowed(("nested+ta_out_unknown_shape", "nested+ta_out_dynamic"), 422, "import",
            r"meets a limit of traced code",
            "GraphError.TRACED_ARRAY (422) under jit: the gradient array of an array of unknown element shape "
            "written in a loop nested in a loop is read at a traced index; the way out is the forward array's "
            "element_shape= or running outside jit (finding F6, which was a bare ValueError)."),
    Allowed(("decoder_until_eos+embedding_fed",), 407, "import", r"a loop variable changes shape",
            "GraphError.LOOP_STRUCTURE (407) under jit: TF's gradient of a Gather in a loop accumulates "
            "IndexedSlices that grow each step; in a loop with a data-dependent trip count (a decoder until EOS, "
            "maximum_iterations=) that is a shape invariant, run only outside jax.jit (finding F7)."),
)

# Programs whose jax.grad cannot be compared with tf.gradients, and why (the other phases still run).
GRAD_NOT_COMPARABLE = {
    "while_no_back_prop": "tf.while_loop(back_prop=False) leaves no trace in the GraphDef (the graph is the same "
                          "node for node as with back_prop=True), so jax.grad differentiates through the loop "
                          "where tf.gradients stops (finding F2: a documentation caveat).",
}

_IMPORTER_CODES = frozenset(m.code for m in GraphError)


@dataclasses.dataclass
class Outcome:
    """What one program did: ``refused`` holds (phase, code, the allow-list entry) of each refused phase."""

    program: tf1_programs.Program
    refused: list[tuple[str, int | None, Allowed]] = dataclasses.field(default_factory=list)


def catalogue_code(error: BaseException) -> int | None:
    """The importer's catalogue code whose class and template ``error`` is, else ``None``."""
    matches = [m for m in GraphError if m.matches(error)]
    # The most specific template wins: 407's "While loop {frame}: {what}" also matches 420's text.
    return max(matches, key=lambda m: len(re.sub(r"\{[^}]*\}", "", m.template))).code if matches else None


def _names(program: tf1_programs.Program) -> set[str]:
    """Node names and while-frame names of the graph (what a refusal must name one of)."""
    names = {n.name for n in program.graph_def.node}
    for n in program.graph_def.node:
        if n.op == "Enter":
            names.add(n.attr["frame_name"].s.decode())
    return names


def names_a_node(program: tf1_programs.Program, text: str) -> bool:
    return any(re.search(rf"(?<![\w/]){re.escape(n)}(?![\w/])", text) for n in _names(program) if len(n) > 1)


def _close(got: list[Any], expected: list[np.ndarray], outputs: list[str], rtol: float, what: str) -> None:
    assert len(got) == len(expected), f"{what}: {len(got)} results for {len(expected)} outputs"
    for name, g, e in zip(outputs, got, expected, strict=True):
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, f"{what} {name}: {g.shape} {g.dtype}, TF {e.shape} {e.dtype}"
        atol = rtol * max(1.0, float(np.max(np.abs(e)))) if e.size and e.dtype.kind == "f" else 0
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"{what} {name}")


def check(program: tf1_programs.Program) -> Outcome:
    """Run ``program`` through the importer; raise ``AssertionError`` unless each phase matches TF or is an
    allowed refusal (see the module docstring)."""
    outcome = Outcome(program)
    p = program
    phases = [("import", _values(p, jit=False)), ("import", _values(p, jit=True))]
    if p.grad_inputs and not p.tags & GRAD_NOT_COMPARABLE.keys():
        phases.append(("grad", _jax_grad(p)))
    for phase, fn in phases:
        try:
            run_phase(phase, fn)
        except Refused as refused:
            entry = _allowed(p, refused)
            outcome.refused.append((refused.phase, catalogue_code(refused.error), entry))
            if phase == "import":
                break  # the jit run traces the same graph: it is refused the same way
    return outcome


def _values(p: tf1_programs.Program, jit: bool) -> Any:
    def run() -> None:
        f = jta.import_graph_def(p.graph_def, inputs=p.inputs, outputs=p.outputs, **p.import_kwargs)
        got = jax.block_until_ready((jax.jit(f) if jit else f)(*p.feeds))
        _close(got, p.expected, p.outputs, p.rtol, "jit" if jit else "eager")
    return run


def _jax_grad(p: tf1_programs.Program) -> Any:
    """``jax.grad`` of the imported forward loss under ``jax.jit``; where a loop's trip count has no static
    bound, jit refuses (LOOP_NEEDS_BOUND) and the gradient runs through ``jta.checked``, the way out it names."""
    def run() -> None:
        forward = jta.import_graph_def(p.graph_def, inputs=p.inputs, outputs=p.outputs[:1], **p.import_kwargs)
        grad = jax.grad(lambda *a: forward(*a)[0], argnums=tuple(p.grad_inputs))
        try:
            grads = jax.jit(grad)(*p.feeds)
        except jta.errors.UnimplementedError as error:
            if not Error.LOOP_NEEDS_BOUND.matches(error):
                raise
            grads = jta.checked(grad)(*p.feeds)
        _close(list(grads), p.grads, p.outputs[len(p.outputs) - len(p.grads):], p.rtol, "jax.grad")
    return run


def _allowed(p: tf1_programs.Program, refused: Refused) -> Allowed:
    """The allow-list entry that covers ``refused``; else an ``AssertionError`` saying why it is a bug."""
    error = refused.error
    text = f"{type(error).__module__}.{type(error).__name__}: {error}"
    code = catalogue_code(error)
    for entry in ALLOWED:
        if any(set(alt.split("+")) <= p.tags for alt in entry.tags) and entry.phase == refused.phase and entry.code == code and \
                re.search(entry.match, str(error), re.DOTALL):
            if code is not None and not names_a_node(p, str(error)):
                raise AssertionError(f"{refused.phase}: refusal {code} names no node of the graph: {text[:2000]}")
            return entry
    kind = f"catalogue code {code}" if code is not None else "not an importer refusal of the catalogue"
    raise AssertionError(f"{refused.phase}: {kind}, not allowed for this program: {text[:3000]}") from error


@pytest.fixture
def alarm() -> Iterator[None]:
    """A program that runs past :data:`SECONDS_PER_PROGRAM` fails (where Python gets control back)."""
    def ring(*_: Any) -> None:
        raise TimeoutError(f"still running after {SECONDS_PER_PROGRAM} s")
    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(SECONDS_PER_PROGRAM)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.long
@pytest.mark.parametrize("seed", SEEDS)
def test_program_matches_session_or_is_refused_as_documented(seed: int, alarm: None) -> None:
    program = tf1_programs.generate(seed)
    try:
        check(program)
    except AssertionError as failure:
        raise AssertionError(f"seed {seed} (python -m tests.helpers.tf1_programs {seed}; legacy cells "
                             f"{tf1_programs.legacy_cells_available()}): {program.description}\n{failure}") from None


def test_allow_list_entries_are_documented_and_cite_a_code() -> None:
    """Each entry names a construct the generator tags, a phase, and a catalogue code or JAX's documented limit."""
    for entry in ALLOWED:
        assert entry.phase in ("import", "grad") and entry.why, entry
        assert entry.code is None or entry.code in _IMPORTER_CODES, entry
        assert re.compile(entry.match).pattern, entry


def test_catalogue_code_recognises_importer_errors_only() -> None:
    """A refusal is told by its class and its template; a ``KeyError`` or an error of another code is not one."""
    refusal = GraphError.LOOP_STRUCTURE.exception(frame="while/while_context", what="something")
    assert catalogue_code(refusal) == 407
    guarded = GraphError.GUARDED_LOOP.exception(frame="cond/while/while_context", kind="an unrolled loop", what="x")
    assert catalogue_code(guarded) == 420  # not 407, whose template matches it too
    assert catalogue_code(KeyError("while/Merge")) is None
    assert catalogue_code(Error.CLOSED.exception(name="ta")) is None
    assert catalogue_code(ValueError(str(refusal))) is None  # the right text with the wrong class


def test_generator_is_reproducible_and_covers_its_constructs() -> None:
    """The same seed gives the same graph and feeds; a handful of seeds spans loops, conds and RNNs."""
    a, b = tf1_programs.generate(24), tf1_programs.generate(24)
    assert a.description == b.description and a.tags == b.tags
    assert [n.name for n in a.graph_def.node] == [n.name for n in b.graph_def.node]
    for x, y in zip(a.feeds, b.feeds, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.outputs[0] == "loss:0" and a.expected[0].shape == ()
    ops = {n.op for n in a.graph_def.node}
    assert {"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"} <= ops, ops


def test_codes_are_unique_across_catalogues() -> None:
    """A traced record holds only a code, decoded in any catalogue (``Message.by_code``)."""
    codes = [m.code for catalogue in (Error, GraphError) for m in catalogue]
    assert len(codes) == len(set(codes))
    assert all(Error.by_code(m.code) is m for catalogue in (Error, GraphError) for m in catalogue)
