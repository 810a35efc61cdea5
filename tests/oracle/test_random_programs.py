"""Random differential programs: TensorFlow's raw TensorArray ops against ``jta.raw_ops``.

A seeded generator (``_programs.Generator``) writes short programs (3-12 ops, 1-2 forward
arrays, gradient arrays of 1-2 sources) of raw ops: create (random size, dtype, known / partial /
unknown element shape, dynamic_size, clear_after_read, identical_element_shapes), write, read,
gather, scatter, concat, split, size, close, GradV3 and GradWithShape, on forward and gradient
handles. About 85% of the ops are meant to be valid under a simple model of the arrays; the rest
are invalid in one way (out-of-range and negative indices, double writes and reads, wrong shapes
and dtypes, bad split lengths, duplicate scatter indices, use after close, gradient of gradient).

* ``test_programs_against_tf``: each program runs on TF (eager ``tf.raw_ops``: the C++ kernels,
  mode K) and on ``jta.raw_ops`` (one state threaded). Both stop at the first error; they must
  agree on every output (values, dtypes, shapes) and on the error (class and text, runtime names
  normalised: ``foo_17`` and ``foo_0`` both read ``foo#<k>``, the array's creation number). TF is
  never sent the two hazards that kill its process (H1: concat of a gradient array whose forward
  was never split, H2: split with a negative length); jta must raise InvalidArgumentError there.
* ``test_programs_under_jit``: the same programs whose arrays all have fully known element shapes
  and fixed sizes (topped up with such programs from a second stream) run inside one ``jax.jit``
  with every index a traced argument (Python-int sizes, shapes, values stay static), then
  ``jta.throw(state)``: the error must be eager jta's (class and text), outputs the same. The jitted
  program ends at the op where eager jta failed: past it, other ops could record further errors,
  and jta keeps one record per array (plus sticky per-slot flags), not one per program.
  Documented differences are accepted and counted (see ``_programs.compare_jit``).
* ``test_regression``: every mismatch these found, as an explicit program (see ``REGRESSIONS``).

Sizes: 60 programs against TF and 20 under jit by default, 1500 and 300 under ``pytest --long``
(see ``tests/conftest.py``); the environment overrides both: ``JTA_ORACLE_PROGRAMS`` programs per
run, ``JTA_ORACLE_JIT_PROGRAMS`` of them under jit, ``JTA_ORACLE_SEED`` (default 0). Run with
``-s`` to see the counts. Many more locally, without pytest (from the repository root)::

    python -m tests.oracle.test_random_programs --programs 5000 --seed 1 [--jit 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pytest

from tests.helpers import scaled
from tests.oracle import _programs

# Default / --long counts (tests/conftest.py); the environment knobs override both.
N_PROGRAMS = int(os.environ.get("JTA_ORACLE_PROGRAMS", scaled(40, 1500)))
SEED = int(os.environ.get("JTA_ORACLE_SEED", "0"))
N_JIT = int(os.environ.get("JTA_ORACLE_JIT_PROGRAMS", scaled(12, 300)))
SHOW = 3  # mismatching programs printed in a failure


def _counts():
    return {"programs": 0, "ops": 0, "errors": 0, "hazards": 0, "mismatches": 0, "accepted": 0}


def check_against_tf(programs, counts, failures):
    """Run ``programs`` on TF and eager jta; count and collect the mismatches."""
    for k, program in enumerate(programs):
        ref, got = _programs.run_tf(program), _programs.run_jta(program)
        counts["programs"] += 1
        counts["ops"] += len(ref.outputs) + (ref.error_at is not None)
        counts["errors"] += ref.error is not None
        counts["hazards"] += ref.hazard is not None
        diffs = _programs.compare(ref, got, program)
        if diffs:
            counts["mismatches"] += 1
            failures.append((k, program, diffs))


def jit_programs(programs, limit, seed):
    """The first ``limit`` jit-eligible ``programs``, topped up (about a quarter of the random
    programs are eligible) with programs of arrays of known shapes from a second stream."""
    eligible = [p for p in programs if _programs.jit_eligible(p)][:limit]
    return eligible + _programs.generate(seed + 1_000_003, limit - len(eligible), jit_friendly=True)


def check_under_jit(programs, limit, counts, failures):
    """Run the first ``limit`` jit-eligible ``programs`` eagerly and under jit on jta; compare."""
    for k, program in enumerate(programs):
        if counts["programs"] >= limit:
            break
        if not _programs.jit_eligible(program):
            continue
        eager = _programs.run_jta(program)
        jitted = _programs.run_jta_jit(program, eager.error_at)
        counts["programs"] += 1
        counts["ops"] += len(eager.outputs) + (eager.error_at is not None)
        counts["errors"] += eager.error is not None
        diffs, accepted = _programs.compare_jit(eager, jitted, program)
        counts["accepted"] += accepted
        if diffs:
            counts["mismatches"] += 1
            failures.append((k, program, diffs))


def _report(failures) -> str:
    return "\n\n".join(f"program {k}:\n{_programs.format_program(p)}\n" + "\n".join(d) for k, p, d in failures[:SHOW])


def _summary(what, counts, seconds) -> str:
    return (f"{what}: {counts['programs']} programs, {counts['ops']} ops compared, {counts['errors']} errors "
            f"compared, {counts['hazards']} hazards, {counts['accepted']} documented differences, "
            f"{counts['mismatches']} mismatches ({seconds:.1f} s)")


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


STATS: dict = {}


@pytest.fixture(scope="module")
def programs():
    return _programs.generate(SEED, N_PROGRAMS, STATS)


def _generated() -> str:
    return (f"generated {STATS['generated_ops']} ops, {STATS['intended_invalid']} meant invalid "
            f"({100 * STATS['intended_invalid'] / max(STATS['generated_ops'], 1):.0f}%)")


@pytest.mark.long
def test_programs_against_tf(tf, programs):
    counts, failures, t0 = _counts(), [], time.perf_counter()
    check_against_tf(programs, counts, failures)
    print(f"\nseed {SEED}: {_generated()}\n" + _summary("eager jta vs TF", counts, time.perf_counter() - t0))
    assert counts["programs"] >= min(N_PROGRAMS, 300)
    assert not failures, _report(failures)


@pytest.mark.long
def test_programs_under_jit(programs):
    counts, failures, t0 = _counts(), [], time.perf_counter()
    check_under_jit(jit_programs(programs, N_JIT, SEED), N_JIT, counts, failures)
    print("\n" + _summary("jta under jit vs eager jta", counts, time.perf_counter() - t0))
    assert counts["programs"] == N_JIT
    assert not failures, _report(failures)


# -- regressions: every mismatch found, as a program ------------------------------------------

REGRESSIONS = {
    # TF names an unnamed array after its node, i.e. the op type: `TensorArrayV3_<n>`; jta said
    # `TensorArray_<n>`. Fixed in jta/raw_ops.py (TensorArrayV3's default name).
    "default-name-is-op-type": [
        {'op': 'create', 'size': 2, 'dtype': 'float64', 'element_shape': [], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': ''},
        {'op': 'read', 'h': 0, 'index': 0, 'dtype': 'float64'},
        {'op': 'grad', 'h': 0, 'source': 'gradients'},
        {'op': 'write', 'h': 1, 'index': 0, 'value': ('v', (), 'float64', 4)},
        {'op': 'write', 'h': 1, 'index': 0, 'value': ('v', (), 'float64', 5)},
        {'op': 'read', 'h': 1, 'index': 0, 'dtype': 'float64'},
        {'op': 'read', 'h': 0, 'index': 0, 'dtype': 'float64'},
    ],
    # Gather's element_shape attribute of another rank: TF's PartialTensorShape::MergeWith says
    # "Incompatible ranks during merge: 1 vs. 2"; jta said "Incompatible shapes during merge:
    # [3] vs. [3,2]". Fixed in jta/_shapes.py (merge_error) used by TensorArray._gather.
    "gather-attr-rank-mismatch": [
        {'op': 'create', 'size': 0, 'dtype': 'float32', 'element_shape': [3], 'dynamic_size': False,
         'clear_after_read': False, 'identical_element_shapes': False, 'name': 'foo'},
        {'op': 'gather', 'h': 0, 'indices': [], 'dtype': 'float32', 'element_shape': [3, 2]},
    ],
    # Concat reads every element (ReadMany) before checking their ranks: an unreadable element 1
    # is reported before the scalar element 0. jta checked each element right after reading it.
    # Fixed in jta/tensor_array.py (TensorArray._concat, slots form).
    "concat-reads-all-before-rank-check": [
        {'op': 'create', 'size': 4, 'dtype': 'float32', 'element_shape': None, 'dynamic_size': True,
         'clear_after_read': False, 'identical_element_shapes': False, 'name': 'foo'},
        {'op': 'write', 'h': 0, 'index': 0, 'value': ('v', (), 'float32', 5)},
        {'op': 'concat', 'h': 0, 'dtype': 'float32', 'element_shape_except0': None},
    ],
    # jit: a traced index into a size-0 array crashed in JAX (an empty axis cannot be indexed:
    # "TypeError: Slice size at index 0 in gather op is out of range") instead of recording
    # "Max scatter index must be < array size (0 vs. 0)". Fixed in jta/tensor_array.py (the
    # dense write/read/gather/scatter at traced indices skip the buffer when it has no rows).
    "jit-scatter-into-size-0": [
        {'op': 'create', 'size': 0, 'dtype': 'float32', 'element_shape': [3], 'dynamic_size': False,
         'clear_after_read': False, 'identical_element_shapes': True, 'name': 'bar'},
        {'op': 'grad', 'h': 0, 'source': 'src'},
        {'op': 'scatter', 'h': 1, 'indices': [0], 'value': ('v', (1, 3), 'float32', 0)},
    ],
    "jit-write-read-gather-size-0": [
        {'op': 'create', 'size': 0, 'dtype': 'int32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'gather', 'h': 0, 'indices': [0], 'dtype': 'int32', 'element_shape': None},
    ],
    "jit-read-size-0": [
        {'op': 'create', 'size': 0, 'dtype': 'int32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'read', 'h': 0, 'index': 0, 'dtype': 'int32'},
    ],
    # Gather reads its indices in order and stops at the first failure (ReadMany): [3, 2] with
    # both slots cleared by the concat fails at 3; jta reported the lowest failing slot, 2 (its
    # static path checked all ranges first, then slot states in slot order). Fixed in
    # jta/tensor_array.py (TensorArray._gather: in-order checks on static indices).
    "gather-stops-at-first-failing-index": [
        {'op': 'create', 'size': 4, 'dtype': 'int64', 'element_shape': [None], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'size', 'h': 0},
        {'op': 'scatter', 'h': 0, 'indices': [1, 0, 2], 'value': ('v', (3, 2), 'int64', 3)},
        {'op': 'concat', 'h': 0, 'dtype': 'int64', 'element_shape_except0': None},
        {'op': 'gather', 'h': 0, 'indices': [3, 2], 'dtype': 'int64', 'element_shape': [2]},
    ],
    # The same at traced indices (jit): the slot flags only say which slots failed, so gather and
    # scatter now also record their first failing position (jta/_records/records.py record_first,
    # TensorArray._gather_dense / _scatter_dense).
    "jit-gather-stops-at-first-failing-index": [
        {'op': 'create', 'size': 4, 'dtype': 'float32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'gather', 'h': 0, 'indices': [2, 3], 'dtype': 'float32', 'element_shape': None},
        {'op': 'gather', 'h': 0, 'indices': [3, 2], 'dtype': 'float32', 'element_shape': None},
    ],
    "jit-gather-repeat-before-out-of-range": [
        {'op': 'create', 'size': 4, 'dtype': 'float32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'read', 'h': 0, 'index': 2, 'dtype': 'float32'},
        {'op': 'gather', 'h': 0, 'indices': [1, 3, 1, 7], 'dtype': 'float32', 'element_shape': None},
    ],
    "jit-gather-cleared-before-out-of-range": [
        {'op': 'create', 'size': 4, 'dtype': 'float32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'read', 'h': 0, 'index': 2, 'dtype': 'float32'},
        {'op': 'gather', 'h': 0, 'indices': [1, 2, 7], 'dtype': 'float32', 'element_shape': None},
    ],
    "jit-scatter-duplicate-before-negative": [
        {'op': 'create', 'size': 4, 'dtype': 'float32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'scatter', 'h': 0, 'indices': [1, 1, -1], 'value': ('v', (3, 2), 'float32', 3)},
    ],
    "jit-scatter-written-before-read-slot": [
        {'op': 'create', 'size': 4, 'dtype': 'float32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'write', 'h': 0, 'index': 3, 'value': ('v', (2,), 'float32', 3)},
        {'op': 'read', 'h': 0, 'index': 2, 'dtype': 'float32'},
        {'op': 'scatter', 'h': 0, 'indices': [1, 3, 2, 0, -1], 'value': ('v', (5, 2), 'float32', 3)},
    ],
    "jit-grad-scatter-read-slot-first": [
        {'op': 'create', 'size': 4, 'dtype': 'float32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'grad', 'h': 0, 'source': 'gradients'},
        {'op': 'read', 'h': 1, 'index': 3, 'dtype': 'float32'},
        {'op': 'read', 'h': 1, 'index': 2, 'dtype': 'float32'},
        {'op': 'scatter', 'h': 1, 'indices': [1, 1, 3, 2], 'value': ('v', (4, 2), 'float32', 3)},
    ],
    # jit: a wrongly shaped scatter at traced indices named index 0 in the shape error; like a
    # write, it now says "<traced>" (the comparator accepts that for the index eager jta names).
    "jit-scatter-shape-names-traced-index": [
        {'op': 'create', 'size': 3, 'dtype': 'float32', 'element_shape': [1, 3], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': False, 'name': 'foo'},
        {'op': 'scatter', 'h': 0, 'indices': [1, 0, 2], 'value': ('v', (3, 2, 3), 'float32', 3)},
    ],
    "jit-scatter-negative-into-size-0": [
        {'op': 'create', 'size': 0, 'dtype': 'float32', 'element_shape': [], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'scatter', 'h': 0, 'indices': [-1], 'value': ('v', (1,), 'float32', 0)},
    ],
    "jit-write-size-0": [
        {'op': 'create', 'size': 0, 'dtype': 'int32', 'element_shape': [2], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'write', 'h': 0, 'index': 0, 'value': ('v', (2,), 'int32', 1)},
    ],
}


# Where each kernel checks "closed": jta.raw_ops checked it first in every op; TF checks the op's
# own arguments first (index shape, dtype, attribute merge, indices/lengths shapes, split sums), and
# a gather of zero indices reads nothing, so it succeeds on a closed array (found by the generator:
# a gather of [] after a close). Fixed in jta/raw_ops.py and jta/tensor_array.py (_write, _read,
# _gather: the closed check where the kernel makes it).
_CREATE = {'op': 'create', 'size': 2, 'dtype': 'float32', 'element_shape': [2], 'dynamic_size': False,
           'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'}
_AFTER_CLOSE = {
    "gather-empty": {'op': 'gather', 'h': 0, 'indices': [], 'dtype': 'float32', 'element_shape': [2]},
    "gather-dtype": {'op': 'gather', 'h': 0, 'indices': [0], 'dtype': 'int32', 'element_shape': None},
    "gather-attr": {'op': 'gather', 'h': 0, 'indices': [0], 'dtype': 'float32', 'element_shape': [3]},
    "gather-matrix": {'op': 'gather', 'h': 0, 'indices': [[0]], 'dtype': 'float32', 'element_shape': None},
    "read-dtype": {'op': 'read', 'h': 0, 'index': 0, 'dtype': 'int32'},
    "read-nonscalar": {'op': 'read', 'h': 0, 'index': [0], 'dtype': 'float32'},
    "write-dtype": {'op': 'write', 'h': 0, 'index': 0, 'value': ('v', (2,), 'int32', 1)},
    "write-nonscalar": {'op': 'write', 'h': 0, 'index': [0], 'value': ('v', (2,), 'float32', 1)},
    "write-range": {'op': 'write', 'h': 0, 'index': 7, 'value': ('v', (2,), 'float32', 1)},
    "scatter-dtype": {'op': 'scatter', 'h': 0, 'indices': [0], 'value': ('v', (1, 2), 'int32', 1)},
    "scatter-scalar": {'op': 'scatter', 'h': 0, 'indices': [0], 'value': ('v', (), 'float32', 1)},
    "scatter-matrix": {'op': 'scatter', 'h': 0, 'indices': [[0]], 'value': ('v', (1, 2), 'float32', 1)},
    "concat-dtype": {'op': 'concat', 'h': 0, 'dtype': 'int32', 'element_shape_except0': None},
    "split-lengths-matrix": {'op': 'split', 'h': 0, 'value': ('v', (2, 2), 'float32', 1), 'lengths': [[1, 1]]},
    "split-scalar": {'op': 'split', 'h': 0, 'value': ('v', (), 'float32', 1), 'lengths': [1]},
    "split-sum": {'op': 'split', 'h': 0, 'value': ('v', (1, 2), 'float32', 1), 'lengths': [1, 1]},
    "split-dtype": {'op': 'split', 'h': 0, 'value': ('v', (2, 2), 'int32', 1), 'lengths': [1, 1]},
    "size": {'op': 'size', 'h': 0},
    "grad-shape": {'op': 'grad_shape', 'h': 0, 'prepend': [2], 'source': 'x'},
}
for _name, _op in _AFTER_CLOSE.items():
    REGRESSIONS[f"closed-{_name}"] = [_CREATE, {'op': 'close', 'h': 0}, _op]


@pytest.mark.parametrize("name", list(REGRESSIONS))
def test_regression(tf, name):
    program = REGRESSIONS[name]
    ref, got = _programs.run_tf(program), _programs.run_jta(program)
    assert not _programs.compare(ref, got, program)
    if _programs.jit_eligible(program):
        diffs, _ = _programs.compare_jit(got, _programs.run_jta_jit(program, got.error_at), program)
        assert not diffs


def test_hazards_are_clear_errors():
    """H1 and H2 are only ever run on jta (TF would abort): both raise InvalidArgumentError."""
    h1 = [
        {'op': 'create', 'size': 2, 'dtype': 'float32', 'element_shape': [1], 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': True, 'name': 'foo'},
        {'op': 'grad', 'h': 0, 'source': 'gradients'},
        {'op': 'concat', 'h': 1, 'dtype': 'float32', 'element_shape_except0': None},
    ]
    h2 = [
        {'op': 'create', 'size': 2, 'dtype': 'float32', 'element_shape': None, 'dynamic_size': False,
         'clear_after_read': True, 'identical_element_shapes': False, 'name': 'foo'},
        {'op': 'split', 'h': 0, 'value': ('v', (1,), 'float32', 0), 'lengths': [2, -1]},
    ]
    for program, text in ((h1, "never split"), (h2, "must be non-negative")):
        got = _programs.run_jta(program)
        assert got.error_at == 2 - (program is h2) and got.error[0] == "InvalidArgumentError"
        assert text in got.error[1] and "TensorFlow aborts the process" in got.error[1]


# -- command line -----------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=N_PROGRAMS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--jit", type=int, default=None, help="programs under jit (default: programs/3)")
    parser.add_argument("--show", type=int, default=5, help="mismatching programs to print")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    programs = _programs.generate(args.seed, args.programs, STATS)
    print(f"seed {args.seed}: {_generated()}")
    n_jit = args.jit if args.jit is not None else args.programs // 3
    status = 0
    for what, run in (("eager jta vs TF", lambda c, f: check_against_tf(programs, c, f)),
                      ("jta under jit vs eager jta", lambda c, f: check_under_jit(
                          jit_programs(programs, n_jit, args.seed), n_jit, c, f))):
        counts, failures, t0 = _counts(), [], time.perf_counter()
        run(counts, failures)
        for k, program, diffs in failures[:args.show]:
            print(f"--- {what}: program {k}\n{_programs.format_program(program)}\n" + "\n".join(diffs))
        print(_summary(what, counts, time.perf_counter() - t0), flush=True)
        status |= bool(failures)
    return status


if __name__ == "__main__":
    sys.exit(main())
