"""Suite-wide pytest configuration.

``--long``: the long runs. By default the statistical tests (random differential programs
against TensorFlow, the same programs under ``jax.jit``, the hypothesis state machine of
``jta.TensorArray``) use small counts, so that ``python -m pytest`` stays within CI's time budget
(under 7 minutes on a quiet 2-core machine). ``pytest --long`` runs them with the large
counts; every assertion is the same, only the number of generated programs/examples grows.
Tests whose size depends on ``--long`` carry the marker ``long`` (``pytest --long -m long`` runs
just those); tests that run under ``--long`` only carry ``long_only`` and are deselected without it
(``tests/test_graph_legacy_cells.py``'s eager run of the whole corpus). Tests marked
``rotate("mode")`` run every combination of their other parameters once by default, under one
``mode`` each, rotating so that every mode still runs (see :func:`rotated`); ``--long`` runs every
mode of every combination. The counts, default / ``--long``:

* ``tests/oracle/test_random_programs.py``: programs against TF 40 / 1500, under jit 12 / 300
  (the environment knobs ``JTA_ORACLE_PROGRAMS`` / ``JTA_ORACLE_JIT_PROGRAMS`` override both;
  it was 300 / 100 before ``--long`` existed);
* ``tests/oracle/test_model_based.py``: hypothesis ``max_examples`` 15 / 200 (20 / 30 steps each;
  it was 60 of 20 before ``--long`` existed);
* ``tests/test_structural_fuzz.py``: 1 / 280 programs per family (19 families; 5,320 under ``--long``);
* ``tests/test_adversarial.py``: hypothesis ``max_examples`` 8 / 500 per property;
* ``tests/test_gradients_cases.py``: TF-style gradient cases through one API each (alternating) / both;
* ``tests/test_kernel_exactness.py``: traced split lengths 2 / 7 per shape case;
* ``tests/test_error_channel.py``: random programs eagerly and under jit 12 / 3000;
* ``tests/test_notebooks.py``: the quickstart notebook runs / all three, and the porting notebook without
  TensorFlow;
* ``tests/test_gradients_vmap.py``: three ways of many gradients at 16 cotangents / at 1, 3 and 16;
* ``tests/test_hoisting.py``: each first-error case in one mode, in rotation / in all three; NumPy
  against staged replays 10 / 200;
* ``tests/test_tf2_list_elements.py``: TensorList programs of elements of their own shapes against TF, every
  third of 174 / all;
* ``tests/test_tf2_import.py``: three of the eight TF2 programs / all (and the Keras layers eagerly), four
  random-program regressions (``inner_bounded_growth``, ``minimum_bound``, ``nested_growth``,
  ``bounded_read_grad``) and the train steps through conds of different intermediates under ``--long`` only, sizes learned by
  ``jta.checked`` in one of forward, train step and ``jax.grad``, in rotation / all three; a list
  written at the steps a counter picks without a bound / with and without; per-step counts of a
  short loop, a split in a loop under a tape and float64 slots under ``--long`` only;
* ``tests/test_tf2_images.py``: one crop method, one bicubic kernel, half the patches, two of four
  non-max suppressions / all;
* ``tests/test_tf2_variables.py``: loops carrying variables in one of three forms / all, and Keras 3
  dropout under ``--long`` only; ``tests/test_tf2_unique.py``: four of nine cases / all, the
  embedding train step under ``--long`` only; a cond in a loop (``test_tf2_import.py``), the loop of
  ``test_tf2_random.py``'s noisy programs and a scan in a foldl in a cond
  (``test_graph_nested_loops.py``) under ``--long`` only;
* ``tests/test_op_fuzz.py``: the op-table fuzzer's specs (ops with integer arguments, fed bad values)
  every 32nd / all 208;
* ``tests/test_tf2_ops_more.py``: shapes an argument decides for two ops / seven, the partition and
  ragged ``value_rowids`` tests under ``--long`` only;
* ``tests/test_tf2_value_checks.py``: half of the index cases / all, bad static arguments of two ops /
  five;
* ``tests/test_tf2_ops_search.py``: half of the cases / all;
* ``tests/test_tf2_segments.py``: run-time ids in a loop with gradients under ``--long`` only;
* ``tests/test_capacity_learning.py``: one run learning three arrays' sizes written forwards / also
  backwards;
* ``tests/test_graph_control_flow.py``: its four heaviest tests under ``--long`` only;
* ``tests/test_graph_import.py``: a third of the graph corpus matched against ``Session.run`` / all of it;
* ``tests/test_while_loop_tf.py``: ``jta.while_loop`` programs against TF 1 / 60 per family (7 families; 3 of
  the bound family, one per exit);
* ``tests/test_symbolic_export_fuzz.py``: programs exported at symbolic dimensions 4 / 400;
* ``tests/test_known.py``: random integer programs whose known values must be XLA's 8 / 3000, random
  loops decided while tracing 3 / 1500;
* ``tests/test_scan_rewrite_fuzz.py``: random counter loops differentiated through the scan rewrite
  against JAX's rule 2 / 1500;
* ``tests/test_record_fields.py``: each record field at the extremes of a few dtypes / of every dtype,
  with TensorFlow's texts checked live and the slot programs at 2**31-1 in a subprocess;
* ``rotate``: the raw-op cases, gradient cases, transforms and traced errors (``mode``), each op's
  single report (``mode``), checks inside higher-order constructs (``mode``), the kernel counts
  (``batched``), the export platforms (``platform``), the HLO shape tests (``checks``, ``checkify``) and ``jta.checkify``'s cases (``how``);
* ``tests/test_sharding.py``: each check on one of its two meshes, alternating / on both;
* ``tests/test_lint.py``: pyright under ``--long`` only (``.ci/run`` runs it after the tests);
* ``tests/test_graph_programs.py``: generated TF1 programs 1 / 300 (about 5 s each: each is built,
  frozen and run by TensorFlow, then imported eagerly, under ``jit`` and differentiated).
* ``tests/test_tf2_programs.py``: generated TF2 programs 1 / 300 (about 3-13 s each: forward and train
  step eagerly, under ``jit`` and under ``jta.checked``, ``jax.grad`` against the tape).
* ``tests/test_tf2_pfor.py``: one pfor program (a loop's jacobian) under ``jit`` / five, also eagerly,
  a 100-step loop's jacobian and a Keras LSTM's batch jacobian.
* ``tests/test_tf2_ops_extra.py``: one or two cases of each op / all (more dilations, resizes, combined
  non-max suppressions, special-function edges, projective transforms' modes, Keras augmentation layers);
* ``tests/test_tf2_random_kernels.py``: draws carried by a loop without a bound / by the three loop forms.
* ``tests/test_tf2_gradient_sweep.py``: the gradient sweep's cases every 96th (4 of 328) / all, with an
  eager ``jax.grad`` too (about 8 minutes);
* ``tests/test_tf2_ops_ctc.py``: ``tf.nn.ctc_loss``, one greedy decoder and one tridiagonal solve (partial
  pivoting, 5 rows) / every attribute, the raw ``CTCLoss`` cases, tf_keras's ``ctc_batch_cost``, four sizes
  of each solver and the second derivative's refusal;
* ``tests/test_tf2_ops_sparse.py``: the sum embedding bag, ``sparse_dense_matmul`` and three segment errors /
  every combiner and weights, ``safe_embedding_lookup_sparse``, each ``tf.sparse`` function and error;
* ``tests/test_tf2_random_gamma.py``: float32 draws and the stateless gamma gradient / every dtype, the
  stateful gradient, a loop carrying a kernel and many draws of many parameters against TF;
* moved under ``--long`` only to keep the default run within CI's budget (each class keeps a default
  test): ``test_tf2_import.py``'s ``Where``/``boolean_mask`` under ``jta.checked``, a custom gradient in a
  called function and a list of an unknown element shape that a loop's condition reads,
  ``test_tf2_ops_more.py``'s size computed from another, values that decide shapes, ``gather_nd``'s
  ``batch_dims``, ``tf.print`` in a loop and Keras 3 subclassed models' keys, ``test_tf2_import.py``'s
  tf_keras LSTM program and a legacy ``Defun`` call,
  ``test_tf2_random.py``'s stateless normals, ``test_tf2_ops_extra.py``'s ``Diag`` and ``Cross``,
  ``test_graph_control_flow.py``'s array grown to a fed length, ``test_tf2_random.py``'s 64-bit draws under x64, and
  (one case / all) the functions without outputs of ``test_tf2_variables.py``, the einsum diagonals, segment
  reductions in a loop and ragged tensors of a given shape of ``test_tf2_ops_more.py``, and the combined
  non-max suppressions' values of ``test_tf2_ops_extra.py`` (its error case runs by default).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import zlib

import pytest

from tests.helpers import budget, xla

xla.use_fast_flags()  # before any test starts JAX's backend (xdist workers import this too)

# Many tests compile the same XLA program (the same ops from another test, mode or worker), and
# JAX's in-memory cache is keyed by the Python function, so each would compile it again. JAX's
# persistent cache is keyed by the program: one directory for the session (made by the xdist
# controller, which imports this first; its workers inherit it) compiles each program once.
# A directory the caller chose is used and kept; the session's own is removed at the end.
_SESSION_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _SESSION_CACHE = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jta-tests-xla-cache-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

# TF1's RNN cells (tf.compat.v1.nn.rnn_cell) live in tf_keras, and TensorFlow reads this switch once,
# when it is first imported: so it is set here, before any test imports TensorFlow, and only where
# tf_keras is installed (without it, the switch would break tf.keras for everyone).
if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# TensorFlow turns its oneDNN kernels on by default only on some x86 CPUs (AVX-512 ones), and the
# two kernel families differ in what they run (Eigen's CPU Conv2D refuses dilations and NCHW) and
# in what they leave unspecified (scratch outputs, which maximum of a tie gets a pool's gradient).
# The oracle is the same TensorFlow on every machine: oneDNN on, unless the caller chose
# (``TF_ENABLE_ONEDNN_OPTS=0 python -m pytest`` runs the suite against Eigen's kernels).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true", default=False,
                     help="run the long versions of the statistical tests (more random programs and "
                          "hypothesis examples; see tests/conftest.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long: a statistical test whose size grows under --long")
    config.addinivalue_line("markers", "long_only: a test that runs under --long only (deselected otherwise)")
    config.addinivalue_line("markers", "rotate(*names): without --long, each combination of the other parameters "
                                       "runs under one value of these parameters, rotating")
    budget.LONG = bool(config.getoption("--long"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHE is not None and not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--long``, the ``long_only`` tests and the rotated-out combinations are deselected
    (reported as such), not skipped."""
    if budget.LONG:
        return
    kept = rotated(item for item in items if not item.get_closest_marker("long_only"))
    deselected = [item for item in items if item not in kept]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item in kept]


def rotated(items) -> set[pytest.Item]:
    """The items a default run keeps of tests marked ``rotate(*names)``, and every other item.

    Per test function, the combinations of its parameters other than ``names`` are numbered in
    collection order; combination ``k`` keeps the ``(k + offset)``-th value of ``names`` among
    those it has, where ``offset`` is a hash of the function's name. So each combination runs once
    and, across combinations and functions, every value of ``names`` runs (a function of one
    combination runs under a different mode than its neighbour)."""
    kept: set[pytest.Item] = set()
    groups: dict[tuple, dict[tuple, list[pytest.Item]]] = {}
    for item in items:
        marker = item.get_closest_marker("rotate")
        params = getattr(getattr(item, "callspec", None), "params", None)
        if marker is None or not params or not set(marker.args) <= set(params):
            kept.add(item)
            continue
        function = (item.path, getattr(item, "originalname", item.name))
        others = tuple(sorted((k, repr(v)) for k, v in params.items() if k not in marker.args))
        groups.setdefault(function, {}).setdefault(others, []).append(item)
    for (_, name), combinations in groups.items():
        offset = zlib.crc32(name.encode())
        for k, variants in enumerate(combinations.values()):
            kept.add(variants[(k + offset) % len(variants)])
    return kept


def pytest_report_header(config: pytest.Config) -> str:
    return f"jta: long runs {'on' if budget.LONG else 'off (--long to enable)'}"
