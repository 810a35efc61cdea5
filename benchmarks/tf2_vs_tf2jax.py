"""``python -m benchmarks.tf2_vs_tf2jax``: jta.import_function against tf2jax on the TF2 test programs.

Not a timing: a coverage comparison. Every program of :mod:`tests.helpers.tf2_programs` (the eight
of ``PROGRAMS``, then ``KERAS``, ``NESTED`` and ``MORE``) goes through each tool, and four checks
are recorded against TensorFlow:

* ``forward``: the imported forward, called eagerly, against ``program.forward(*args)``;
* ``jit``: the same under ``jax.jit``;
* ``grad``: ``jax.jit(jax.grad(loss))(params)``, ``loss`` the sum of squares of the forward's
  floating outputs, against the tape gradients of ``program.train`` (if only the un-jitted
  ``jax.grad`` works the cell is ``✓*``, with jit's error in the notes);
* ``train``: the imported train step (a ``tf.GradientTape`` inside the ``tf.function``) under
  ``jax.jit``, its loss and gradients against ``program.train(*args)``.

The tools: ``jta`` (``jta.import_function``), ``jta pad_stacks`` (``pad_stacks=True``, only for the
programs whose trip count the data decides: under ``jit`` their stacks get the loop bound's rows,
the rows past TensorFlow's length zeros, which the comparison accepts) and ``tf2jax``
(``tf2jax.convert``; its ``jax_fn`` returns ``(outputs, params)``). tf2jax is optional: without it
its rows are skipped. A failure's cell is ``✗ [n]``; the first line of each exception (or the
mismatch) is listed under the table.

    python -m benchmarks.tf2_vs_tf2jax                 # all programs
    python -m benchmarks.tf2_vs_tf2jax scan lstm       # some of them
    TF2_VS_TF2JAX_TRACEBACK=1 python -m benchmarks.tf2_vs_tf2jax scan   # print failures' tracebacks
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import jta  # noqa: E402
from tests.helpers import tf2_programs  # noqa: E402

try:
    import tf2jax  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - optional
    tf2jax = None

RTOL, ATOL = 2e-4, 2e-5  # tests/test_tf2_import.py's tolerances
DYNAMIC = ("early_exit", "greedy_decoder")  # the trip count is the data's
CELL_TIMEOUT_S = 300
CHECKS = ("forward", "jit", "grad", "train")


class Mismatch(AssertionError):
    pass


class CellTimeout(Exception):
    pass


class Relayed(Exception):
    """Another exception's first line(s), passed on as they are."""


def _first_line(e: BaseException) -> str:
    if isinstance(e, Relayed):
        return str(e)
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".strip()


def _compare(got: Any, want: Any, pad: bool = False) -> None:
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(got)]
    ref = [np.asarray(tf.convert_to_tensor(x)) for x in tf.nest.flatten(want)]
    if len(leaves) != len(ref):
        raise Mismatch(f"{len(leaves)} outputs, TensorFlow has {len(ref)}")
    for i, (a, b) in enumerate(zip(leaves, ref, strict=True)):
        if pad and a.ndim and b.ndim and a.shape != b.shape and a.shape[1:] == b.shape[1:] \
                and a.shape[0] >= b.shape[0]:  # a padded stack: TF's rows, then zeros
            if np.any(a[b.shape[0]:] != 0):
                raise Mismatch(f"output {i}: padding rows are not zero")
            a = a[:b.shape[0]]
        if a.shape != b.shape:
            raise Mismatch(f"output {i}: shape {a.shape}, TensorFlow {b.shape}")
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
            err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
            raise Mismatch(f"output {i}: max abs error {err:.3g}")


def _squares(outs: Any) -> Any:
    leaves = jax.tree_util.tree_leaves(outs)
    return sum(jnp.sum(jnp.square(o)) for o in leaves if jnp.issubdtype(jnp.asarray(o).dtype, jnp.floating))


def _param_key(v: Any, params: dict[str, Any]) -> str:
    """The key of ``params`` that holds TF variable ``v`` (names differ between tools and Keras versions)."""
    names = [getattr(v, "path", None), v.name.removesuffix(":0"), v.name]
    handle = getattr(v, "handle", None)
    if handle is not None:
        try:
            names.append(handle.op.name)
        except (AttributeError, ValueError):
            pass
    for n in names:
        if n and n in params:
            return n
    for k, p in params.items():  # tf2jax's Variable arrays carry the TF name
        if getattr(p, "name", None) in (v.name, v.name.removesuffix(":0")):
            return k
    raise Mismatch(f"no parameter for variable {v.name!r} among {sorted(params)}")


class Tool:
    name = ""

    def convert(self, fn: Any, args: tuple[Any, ...]) -> tuple[Callable[..., Any], dict[str, Any]]:
        raise NotImplementedError

    def pad(self) -> bool:
        return False


class Jta(Tool):
    def __init__(self, pad_stacks: bool = False) -> None:
        self.pad_stacks = pad_stacks
        self.name = "jta pad_stacks" if pad_stacks else "jta"

    def convert(self, fn: Any, args: tuple[Any, ...]) -> tuple[Callable[..., Any], dict[str, Any]]:
        return jta.import_function(fn, *args, pad_stacks=self.pad_stacks)

    def pad(self) -> bool:
        return self.pad_stacks


class Tf2jax(Tool):
    name = f"tf2jax {getattr(tf2jax, '__version__', '')}".strip()

    def convert(self, fn: Any, args: tuple[Any, ...]) -> tuple[Callable[..., Any], dict[str, Any]]:
        jax_fn, params = tf2jax.convert(fn, *args)
        return (lambda p, *a: jax_fn(p, *a)[0]), dict(params)  # drop the updated params


def _with_timeout(thunk: Callable[[], Any]) -> Any:
    def handler(signum: int, frame: Any) -> None:
        raise CellTimeout(f"over {CELL_TIMEOUT_S} s")
    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(CELL_TIMEOUT_S)
    try:
        return thunk()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check_program(program: tf2_programs.Program, tool: Tool) -> dict[str, tuple[bool, str]]:
    """``{check: (ok, note)}`` for one program and one tool."""
    result: dict[str, tuple[bool, str]] = {}
    args = program.args
    want = program.forward(*args)
    tf_loss, tf_grads = program.train(*args)
    tf_grads = [np.asarray(tf.convert_to_tensor(g)) for g in tf_grads]

    def run(check: str, thunk: Callable[[], str]) -> None:
        try:
            result[check] = (True, _with_timeout(thunk) or "")
        except Exception as e:  # noqa: BLE001 - every failure is recorded
            result[check] = (False, _first_line(e))
            if os.environ.get("TF2_VS_TF2JAX_TRACEBACK"):
                traceback.print_exc()

    try:
        fwd, params = _with_timeout(lambda: tool.convert(program.forward, args))
    except Exception as e:  # noqa: BLE001
        note = "import: " + _first_line(e)
        result.update({c: (False, note) for c in ("forward", "jit", "grad")})
    else:
        def forward() -> str:
            _compare(fwd(params, *args), want)
            return ""

        def jitted() -> str:
            _compare(jax.jit(fwd)(params, *args), want, pad=tool.pad())
            return ""

        def grad() -> str:
            keys = [_param_key(v, params) for v in program.variables]

            def loss(p: dict[str, Any]) -> Any:
                return _squares(fwd(p, *args))
            try:
                grads, note = jax.jit(jax.grad(loss))(params), ""
            except Exception as e:  # noqa: BLE001
                jit_error = _first_line(e)
                try:
                    grads, note = jax.grad(loss)(params), "un-jitted only; jit: " + jit_error
                except Exception as e2:  # noqa: BLE001
                    other = _first_line(e2)
                    raise Relayed(jit_error if other == jit_error
                                   else f"jit: {jit_error} / un-jitted: {other}") from None
            for k, g in zip(keys, tf_grads, strict=True):
                try:
                    _compare(grads[k], g)
                except Mismatch as e:
                    raise Mismatch(f"d/d{k}: {e}") from None
            return note  # non-empty: only the un-jitted grad matches
        run("forward", forward)
        run("jit", jitted)
        run("grad", grad)

    def train() -> str:
        step, p = tool.convert(program.train, args)
        _compare(jax.jit(step)(p, *args), (tf_loss, tf_grads), pad=tool.pad())
        return ""
    run("train", train)
    return result


def _builders() -> dict[str, Callable[..., tf2_programs.Program]]:
    out: dict[str, Callable[..., tf2_programs.Program]] = {}
    for registry in ("PROGRAMS", "KERAS", "NESTED", "MORE"):
        out.update(getattr(tf2_programs, registry, {}))
    return out


def main(argv: list[str]) -> int:
    builders = _builders()
    names = argv or list(builders)
    rows: list[tuple[str, str, dict[str, tuple[bool, str]]]] = []
    notes: list[str] = []
    for name in names:
        program = builders[name]()
        program_tools: list[Tool] = [Jta()] + ([Jta(pad_stacks=True)] if name in DYNAMIC else [])
        if tf2jax is not None:
            program_tools.append(Tf2jax())
        for tool in program_tools:
            res = check_program(program, tool)
            rows.append((name, tool.name, res))
            print(f"{name:26s} {tool.name:16s} " + "  ".join(
                f"{c}={'ok' if res[c][0] else 'FAIL'}" for c in CHECKS), file=sys.stderr, flush=True)

    print("| program | tool | forward | jit | grad | train |")
    print("|---|---|---|---|---|---|")
    for name, tool_name, res in rows:
        cells = []
        for c in CHECKS:
            ok, note = res[c]
            if ok and not note:
                cells.append("✓")
                continue
            if note not in notes:
                notes.append(note)
            cells.append(f"{'✓*' if ok else '✗'} [{notes.index(note) + 1}]")
        print(f"| {name} | {tool_name} | " + " | ".join(cells) + " |")
    if tf2jax is None:
        print("\n(tf2jax is not installed: its rows are skipped.)")
    if notes:
        print()
        for i, note in enumerate(notes, 1):
            print(f"{i}. {note.replace('|', '/')}")
    print()
    totals = {}
    for _, tool_name, res in rows:
        t = totals.setdefault(tool_name, [0, 0])
        t[0] += sum(ok and not note for ok, note in res.values())
        t[1] += len(res)
    print("Passed checks (✓ only): " + ", ".join(f"{k} {a}/{b}" for k, (a, b) in totals.items()))
    print(f"\njax {jax.__version__}, tensorflow {tf.__version__}, numpy {np.__version__}"
          + (f", tf2jax {tf2jax.__version__}" if tf2jax is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
