"""Structural differential fuzzer: random programs run eagerly and in three compiled modes.

``tests/helpers/structural.py`` writes seeded random programs that combine ``jta.TensorArray``
ops and ``jta.raw_ops`` with program structure (scan, fori_loop, while_loop with data-dependent
exits, cond/switch, checkpoint, custom_vjp/custom_jvp, nested jit with static arguments, vmap
inside and outside, grad/jvp/vjp, checkify inside, shard_map, arrays made inside and outside
loops, swapped carries, input shapes changing across calls); indices are data dependent,
sometimes out of range. Each program runs with two or three argument tuples (one compiled
function per mode, reused for all of them):

* ``eager`` (the reference): ``jta.throw(program(*args))`` under ``jax.disable_jit()``: the first
  error's class and text, or the values;
* ``checked``: ``jta.checked(program)(*args)``;
* ``jit-checkify``: ``errors, out = jax.jit(jta.checkify(program))(*args)``, ``jta.throw(errors)``;
* ``export``: ``jax.export.export(jax.jit(jta.checkify(program)))(*args)``, serialized,
  deserialized, called (on as many devices as it was exported for), ``jta.throw(errors)``;
* ``dispatch`` (``--dispatch`` only): ``jta.throw(program(*args))`` called eagerly without
  ``disable_jit``, where JAX compiles each loop and conditional as it dispatches it (programs
  without a ``jax.jit``, ``shard_map`` or ``checkify`` of their own). Not in the suite: there the
  arguments are concrete, so a loop body or an untaken branch that indexes out of range with
  them raises while it is traced, where the op-by-op reference never runs it (the documented
  "static problems raise while tracing" rule); every other outcome must be eager's.

Every compiled mode must agree with eager: the same first error (exception class and ``str``),
else the same output structure and values (``np.testing.assert_allclose``, rtol/atol 1e-5; an
array's ``flow`` leaf aside, distinct per new array by design).

Tests:

* ``test_structural_programs[FAMILY]``: ``PROGRAMS`` programs of one structure family
  (``structural.FAMILIES``; ``mixed`` in two chunks). ``-k "programs[scan-swap]"`` runs one.
* ``test_mismatch_class[NAME]``: each mismatch class found so far, as one minimal program
  (``structural.REGRESSIONS``), in all three modes: ``-k "class[NAME]"`` checks one fix.
* ``test_documented_difference[NAME]``: where eager and compiled code differ by design
  (``structural.DIFFERENCES``), each mode gives exactly its documented outcome.
* ``test_generation_is_reproducible_and_readable``.

**Budget.** XLA:CPU takes ~0.1 s to compile each checked TensorArray op, so a program costs
~0.3 s per compiled mode. By default each program runs eagerly and in *one* compiled mode, in
rotation by seed and family (``checked``, ``jit-checkify``, ``export``: one program per family,
each mode for 6 or 7 of the 19 families).
Under ``pytest --long`` (280 programs per family, 5320, in 4x as many chunks) every program runs
in all three modes. The environment overrides: ``JTA_FUZZ_PROGRAMS`` (per family),
``JTA_FUZZ_SEED`` (first seed, default 0), ``JTA_FUZZ_ALL_MODES`` (``1``: all three modes,
``0``: the rotation).

**Where programs run.** In a child process (``python -m tests.test_structural_fuzz --child``,
one per pytest worker, kept for the module) with ``XLA_FLAGS`` set for it alone:
``--xla_force_host_platform_device_count=4`` (``shard_map`` programs need devices) and
``FAST_XLA_FLAGS`` (the suite's, ``tests/helpers/xla.py``), XLA:CPU codegen options that compile these programs 2.5x faster and change
nothing they compute (``JTA_FUZZ_XLA_FLAGS`` replaces them, e.g. with ``""``). The child reports
each step (a mode, a call) as it starts: a step that uses more than ``TIMEOUT`` CPU seconds (or
``WALL_TIMEOUT`` wall seconds) is a ``timeout`` mismatch (a ``while_loop`` that never exits:
compiled code reads a clamped slot past the end, where eager code raises), and the child is
killed and restarted at the next mode. After ``MAX_HANGS`` timeouts in one test, the compiled
modes of its remaining hang-prone programs (``Program.may_hang``) are reported as ``skipped``
(still a failure) to bound the time.

A failure prints the mismatch classes (mode, what differs, the head of the compiled error) with
their counts and, for the first ``SHOW`` programs, their source, calls, eager and compiled
outcomes and the command that reruns them. Outside pytest::

    python -m tests.test_structural_fuzz --family scan-swap --programs 50 [--seed 0] [--show 3] [--all-modes] [--json out.json]
    python -m tests.test_structural_fuzz --family scan-swap --seed 17 --programs 1 --script > repro.py
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

from tests.helpers import budget, structural, xla

PROGRAMS = 1  # per family: 19 families, 19 programs (17, then 11, 8, 6, 4, 3 and 2, as the importer's, loops' and channel's tests needed the time)
LONG_PROGRAMS = 280  # per family under --long: 5320 programs
CHUNKS = {"mixed": 2}  # families split over several tests (xdist spreads them); 4x under --long
N_PROGRAMS = int(os.environ.get("JTA_FUZZ_PROGRAMS", budget.scaled(PROGRAMS, LONG_PROGRAMS)))
SEED = int(os.environ.get("JTA_FUZZ_SEED", "0"))
ALL_MODES = os.environ.get("JTA_FUZZ_ALL_MODES", "1" if budget.LONG else "0") == "1"
TIMEOUT = 10.0  # CPU seconds per step (one mode, one call) of the child process; 3x for eager runs
WALL_TIMEOUT = 120.0  # wall seconds per step, whatever the load
FAST_XLA_FLAGS = xla.FAST_FLAGS
XLA_FLAGS = os.environ.get("JTA_FUZZ_XLA_FLAGS", FAST_XLA_FLAGS)
MAX_HANGS = 2  # timeouts per test before the rest of its hang-prone programs are skipped
MAX_RSS_MB = 2500  # the child is restarted past this resident size (its caches only grow)
SHOW = 3  # programs printed in a failure
MODES = ("checked", "jit-checkify", "export")
# jta's exception classes (jta/errors.py) and ValueError: what eager programs may raise
JTA_ERRORS = ("InvalidArgumentError", "OutOfRangeError", "UnimplementedError", "NotFoundError",
              "ResourceExhaustedError", "ValueError")
ROOT = Path(__file__).resolve().parents[1]


# -- running one program ----------------------------------------------------------------------

def _leaves(out: Any) -> tuple[str, list]:
    """The output's structure and leaves, but an array's ``flow`` (each new array's is distinct)."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten_with_path(out)
    return str(jax.tree_util.tree_structure(out)), [
        x if isinstance(x, str) else np.asarray(x) for path, x in leaves if "flow" not in jax.tree_util.keystr(path)]


def _outcome(thunk: Callable[[], Any]) -> dict:
    """``{"error": (class, text)}`` or ``{"tree": ..., "leaves": [...]}``."""
    try:
        out = thunk()
        tree, leaves = _leaves(out)
    except Exception as e:  # noqa: BLE001 - every exception is compared with eager's
        return {"error": (type(e).__name__, str(e))}
    return {"tree": tree, "leaves": leaves}


def _dynamic(program: structural.Program, args: tuple) -> tuple:
    return tuple(a for k, a in enumerate(args) if k not in program.static_argnums)


class Runner:
    """The four modes of one program; the compiled callables are made once and reused for all
    the program's calls (``checked``'s cache, ``jit``'s cache; one export per argument shapes)."""

    def __init__(self, program: structural.Program):
        import jax

        import jta

        self.program = program
        self.fn = program.build()
        static = program.static_argnums
        self.checked = jta.checked(self.fn)
        self.jitted = jax.jit(jta.checkify(self.fn), static_argnums=static)
        self.exports: dict = {}

    def eager(self, args: tuple) -> dict:
        import jax

        import jta

        def run():
            with jax.disable_jit():
                return jta.throw(self.fn(*args))
        with jax.enable_x64(self.program.x64):
            return _outcome(run)

    def run(self, mode: str, args: tuple) -> dict:
        import jax

        with jax.enable_x64(self.program.x64):
            return self._run(mode, args)

    def _run(self, mode: str, args: tuple) -> dict:
        import jax

        import jta

        if mode == "checked":
            return _outcome(lambda: self.checked(*args))
        if mode == "dispatch":  # eager calls, JAX compiling loops and conditionals as it dispatches them
            return _outcome(lambda: jta.throw(self.fn(*args)))
        if mode == "jit-checkify":
            def run():
                errors, out = self.jitted(*args)
                jta.throw(errors)
                return out
            return _outcome(run)

        def exported():
            key = tuple((np.shape(a), str(np.asarray(a).dtype)) if k not in self.program.static_argnums else a
                        for k, a in enumerate(args))
            if key not in self.exports:
                exp = jax.export.export(self.jitted)(*args)
                self.exports[key] = jax.export.deserialize(exp.serialize())
            exported, dynamic = self.exports[key], _dynamic(self.program, args)
            if exported.nr_devices > 1:  # called on as many devices as it was exported for
                from jax.sharding import Mesh, NamedSharding, PartitionSpec
                mesh = Mesh(np.array(jax.devices()[:exported.nr_devices]), ("x",))
                dynamic = jax.device_put(dynamic, NamedSharding(mesh, PartitionSpec()))
            errors, out = exported.call(*dynamic)
            jta.throw(errors)
            return out
        return _outcome(exported)


def modes_of(seed: int, all_modes: bool = ALL_MODES, program: Optional[structural.Program] = None,
             dispatch: bool = False) -> tuple[str, ...]:
    """The modes of the program of ``seed``: all three compiled ones, or one in rotation; and
    with ``dispatch``, ``dispatch`` for a program that compiles nothing itself."""
    # (the rotation is offset by the family, so that one program per family still covers every mode)
    offset = structural.FAMILIES.index(program.family) if program is not None and program.family in structural.FAMILIES else 0
    modes = MODES if all_modes else (MODES[(seed + offset) % len(MODES)],)
    if program is not None and program.checked_only:  # see Program.checked_only
        modes = ("checked",)
    if dispatch and program is not None and dispatches(program):
        modes += ("dispatch",)
    return modes


def dispatches(program: structural.Program) -> bool:
    """Whether ``program`` called eagerly must give eager's outcome: it holds no ``jax.jit`` or
    ``shard_map`` (compiled code, where value ops raise from callbacks, unordered: the
    documented bare-``jit`` mode) and no ``checkify`` of its own."""
    return not any(word in program.source for word in ("jax.jit", "shard_map(", "checkify("))


def compare(expected: dict, got: dict) -> Optional[str]:
    """Why ``got`` differs from ``expected`` (eager's), or ``None``."""
    if "error" in expected or "error" in got:
        if expected.get("error") == got.get("error"):
            return None
        if "error" not in got:
            return "error lost"
        if "error" not in expected:
            return "spurious error"
        return "different error" if expected["error"][0] == got["error"][0] else "different error class"
    if expected["tree"] != got["tree"]:
        return "different output structure"
    if len(expected["leaves"]) != len(got["leaves"]):
        return "different output structure"
    for a, b in zip(expected["leaves"], got["leaves"], strict=True):
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                return "different values"
            continue
        if a.shape != b.shape:
            return "different values"
        try:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
        except AssertionError:
            return "different values"
    return None


def _short(outcome: dict) -> str:
    if outcome is None:
        return "-"
    if "error" in outcome:
        cls, text = outcome["error"]
        text = text.split("\n--------------------")[0]
        return f"{cls}: {text[:300]}"
    flat = [np.ravel(np.asarray(x, np.float64)) for x in outcome["leaves"] if not isinstance(x, str)]
    values = np.concatenate(flat) if flat else np.zeros(0)
    return f"values {np.array2string(values[:12], precision=4)}{' ...' if values.size > 12 else ''}"


def check_program(program: structural.Program, modes: tuple, on_event: Optional[Callable[[dict], None]] = None,
                  start: int = 0) -> list[dict]:
    """Run ``program``'s calls eagerly and in ``modes``; the mismatches (dicts). ``start`` skips
    the first (mode, call) steps (the child resumes after a timeout); ``on_event`` hears each
    step before it runs."""
    runner = Runner(program)
    expected = [runner.eager(args) for args in program.calls]
    mismatches = []
    step = 0
    for mode in modes:
        for k, args in enumerate(program.calls):
            if step >= start:
                if on_event is not None:
                    on_event({"event": "start", "step": step, "mode": mode, "call": k})
                got = runner.run(mode, args)
                why = compare(expected[k], got)
                if why is not None:
                    mismatches.append(mismatch(program, mode, k, why, expected[k], got))
            step += 1
    return mismatches


def mismatch(program: structural.Program, mode: str, call: int, why: str, expected: Optional[dict], got: Optional[dict]) -> dict:
    return {"family": program.family, "seed": program.seed, "mode": mode, "call": call, "why": why,
            "expected": _short(expected) if expected is not None else "-",
            "got": _short(got) if got is not None else "-",
            "got_class": got["error"][0] if got and "error" in got else None,
            "expected_class": expected["error"][0] if expected and "error" in expected else None,
            "features": list(program.features)}


# -- the child process -------------------------------------------------------------------------

def child_main() -> int:
    """Read ``{"family", "seed", "modes", "start"}`` lines; report each step and the result."""
    def send(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    send({"event": "ready"})
    for line in sys.stdin:
        req = json.loads(line)
        program = structural.generate(req["family"], req["seed"])
        send({"event": "start", "step": -1, "mode": "eager", "call": 0})
        cpu = time.process_time()
        try:
            found = check_program(program, tuple(req["modes"]), send, req.get("start", 0))
        except Exception:  # noqa: BLE001 - a crash of the harness itself: report it
            found = [mismatch(program, "harness", 0, "harness crash", None,
                              {"error": ("HarnessError", traceback.format_exc()[-2000:])})]
        send({"event": "result", "mismatches": found, "cpu": time.process_time() - cpu})
    return 0


def _rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MiB (0 without /proc)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def _cpu_seconds(pid: int) -> Optional[float]:
    """The CPU time (user + system, all threads) of process ``pid`` so far; None without /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Child:
    """A ``--child`` process; ``check`` enforces ``TIMEOUT`` per step."""

    def __init__(self) -> None:
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={structural.DEVICES} {XLA_FLAGS}".strip(),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        self.stderr = tempfile.TemporaryFile(mode="w+")  # kept for a crash's report
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.test_structural_fuzz", "--child"], cwd=ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        self.fresh = True  # nothing compiled yet: the first eager runs compile JAX's primitives
        self.cpu = 0.0  # CPU seconds the child spent on programs
        threading.Thread(target=self._read, daemon=True).start()
        msg = self.lines.get(timeout=120.0)
        if msg is None or msg["event"] != "ready":
            raise RuntimeError(f"the child process did not start: {msg}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def check(self, program: structural.Program, modes: tuple, start: int = 0) -> tuple[list[dict], Optional[dict]]:
        """``(mismatches, hung step)``: the step (an event dict) that timed out, if one did."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"family": program.family, "seed": program.seed, "modes": list(modes),
                                          "start": start}) + "\n")
        self.proc.stdin.flush()
        step: dict = {"event": "start", "step": -1, "mode": "eager", "call": 0}
        since, cpu0 = time.monotonic(), _cpu_seconds(self.proc.pid)
        while True:
            # A hang spins a core: the limit is on the child's CPU time, so that a slow compile
            # on a loaded machine is not taken for one (wall time where /proc is missing).
            # Eager runs warm up JAX's primitive cache: slow in a fresh child.
            limit = TIMEOUT * (6 if step["mode"] == "eager" and self.fresh else 3 if step["mode"] == "eager" else 1)
            try:
                msg = self.lines.get(timeout=1.0)
            except queue.Empty:
                cpu = _cpu_seconds(self.proc.pid)
                used = time.monotonic() - since if cpu is None or cpu0 is None else cpu - cpu0
                if used > limit or time.monotonic() - since > WALL_TIMEOUT:
                    return [], step
                continue
            since, cpu0 = time.monotonic(), _cpu_seconds(self.proc.pid)
            if msg is None:  # the child died (a crash in JAX or XLA): report it, with its last words
                self.proc.wait()
                self.stderr.seek(0)
                tail = self.stderr.read()[-1500:]
                return [mismatch(program, step["mode"], max(step["call"], 0), f"crash (exit {self.proc.returncode})",
                                 None, {"error": ("ChildCrash", tail)})], step | {"crashed": True}
            if msg["event"] == "result":
                self.fresh = False
                self.cpu += msg["cpu"]
                return msg["mismatches"], None
            step = msg

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)  # the child's own session (start_new_session): it alone
        self.proc.wait()
        self.stderr.close()


class Children:
    """One live child at a time, started on demand and after a timeout."""

    def __init__(self) -> None:
        self.child: Optional[Child] = None

    def get(self) -> Child:
        if self.child is None:
            self.child = Child()
        return self.child

    def kill(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None


def check_in_child(children: Children, programs: list[tuple[structural.Program, tuple]], out: list[dict],
                   counts: collections.Counter) -> None:
    """Run ``programs`` (with their modes) in the child, restarting it after a timeout."""
    hangs = 0
    for program, modes in programs:
        steps = len(modes) * len(program.calls)
        start = 0
        while start < steps:
            if hangs >= MAX_HANGS and program.may_hang:
                for mode in modes[start // len(program.calls):]:
                    out.append(mismatch(program, mode, 0, "skipped (earlier timeouts)", None, None))
                counts["skipped"] += 1
                break
            child = children.get()
            cpu = child.cpu
            found, hung = child.check(program, modes, start)
            counts["child cpu s"] += round(child.cpu - cpu, 2)
            out.extend(found)
            if hung is None:
                rss = _rss_mb(child.proc.pid)
                counts["child max MiB"] = max(counts["child max MiB"], round(rss))
                if rss > MAX_RSS_MB:  # JAX keeps every compiled program: start afresh
                    counts["child restarts"] += 1
                    children.kill()
                break
            children.kill()
            if hung.get("crashed"):
                counts["crashes"] += 1
                start = (max(hung["step"], 0) // len(program.calls) + 1) * len(program.calls) \
                    if hung["step"] >= 0 else steps
                continue
            hangs += 1
            counts["timeouts"] += 1
            if hung["step"] < 0:  # eager: no reference for this program
                out.append(mismatch(program, "eager", 0, f"eager timeout (> {TIMEOUT * 3:.0f} CPU s)", None, None))
                break
            out.append(mismatch(program, hung["mode"], hung["call"], f"timeout (> {TIMEOUT:.0f} CPU s)", None, None))
            start = (hung["step"] // len(program.calls) + 1) * len(program.calls)  # the next mode


# -- a family's run ---------------------------------------------------------------------------

def seeds(chunk: int, n_chunks: int, n: int = N_PROGRAMS, first: int = SEED) -> list[int]:
    return [first + k for k in range(n) if k % n_chunks == chunk]


def run_family(children: Children, family: str, seed_list: list[int], counts: collections.Counter,
               all_modes: bool = ALL_MODES, dispatch: bool = False) -> list[dict]:
    """Every program of ``family`` for ``seed_list``, in the child; the mismatches."""
    found: list[dict] = []
    programs = []
    for seed in seed_list:
        program = structural.generate(family, seed)
        modes = modes_of(seed, all_modes, program, dispatch)
        programs.append((program, modes))
        counts["programs"] += 1
        counts["calls"] += len(program.calls)
        counts["may hang"] += program.may_hang
        for mode in modes:
            counts[f"mode {mode}"] += 1
    check_in_child(children, programs, found, counts)
    return found


def classify(m: dict) -> str:
    """A mismatch's class: the mode, what differs, and what compiled code raised (its class and
    the head of its message, numbers and quoted names blanked)."""
    got = m["got"]
    if m.get("expected_class") and m["expected_class"] not in JTA_ERRORS:
        return f"{m['mode']}: eager raised {m['expected_class']} (a generator bug?)"
    if m["got_class"] and m["why"] != "different error":
        head = re.sub(r"'[^']*'|`[^`]*`|\d+", "_", got.split("\n")[0])[:90]
        return f"{m['mode']}: {m['why']} -- {head}"
    return f"{m['mode']}: {m['why']}"


def report(found: list[dict], show: int = SHOW) -> str:
    classes = collections.Counter(classify(m) for m in found)
    lines = [f"{len(found)} mismatches, {len({(m['family'], m['seed']) for m in found})} programs:"]
    lines += [f"  {n:4d}  {cls}" for cls, n in classes.most_common()]
    shown = []
    for m in found:
        key = (m["family"], m["seed"])
        if key in shown:
            continue
        shown.append(key)
        if len(shown) > show:
            break
        program = structural.generate(*key)
        mine = [x for x in found if (x["family"], x["seed"]) == key]
        lines.append("")
        lines.append(program.describe())
        for x in mine:
            lines.append(f"# {x['mode']} call {x['call']}: {x['why']}\n#   eager: {x['expected']}\n#   got:   {x['got']}")
    return "\n".join(lines)


def _fmt(counts: collections.Counter) -> str:
    return ", ".join(f"{k}: {round(v, 1) if isinstance(v, float) else v}" for k, v in counts.items())


def _params() -> list:
    out = []
    for family in structural.FAMILIES:
        n = min(CHUNKS.get(family, 1) * budget.scaled(1, 4), N_PROGRAMS)  # (no chunk without a program)
        for chunk in range(n):
            out.append(pytest.param(family, chunk, n, id=f"{family}-{chunk}" if n > 1 else family))
    return out


@pytest.fixture(scope="module")
def children():
    kids = Children()
    yield kids
    kids.kill()


@pytest.mark.long
@pytest.mark.parametrize("family, chunk, n_chunks", _params())
def test_structural_programs(children: Children, family: str, chunk: int, n_chunks: int) -> None:
    counts: collections.Counter = collections.Counter()
    t0 = time.perf_counter()
    found = run_family(children, family, seeds(chunk, n_chunks), counts)
    print(f"\n{family} chunk {chunk}: {_fmt(counts)}, {len(found)} mismatches ({time.perf_counter() - t0:.1f} s)")
    if found:
        pytest.fail(report(found), pytrace=False)


@pytest.mark.parametrize("name", list(structural.REGRESSIONS))
def test_mismatch_class(children: Children, name: str) -> None:
    """Each mismatch class the fuzzer found, as one minimal program, in all three modes."""
    found: list[dict] = []
    check_in_child(children, [(structural.REGRESSIONS[name], MODES)], found, collections.Counter())
    if found:
        pytest.fail(report(found), pytrace=False)


@pytest.mark.parametrize("name", list(structural.DIFFERENCES))
def test_documented_difference(name: str) -> None:
    """Each mode gives its documented outcome: the values (the same in every mode that gives
    them) or the error (its class, and a text its message holds)."""
    program, expected = structural.DIFFERENCES[name]
    runner = Runner(program)
    for k, args in enumerate(program.calls):
        outcomes = {"eager": runner.eager(args)} | {mode: runner.run(mode, args) for mode in MODES}
        values = [o for o in outcomes.values() if "error" not in o]
        for mode, got in outcomes.items():
            want = expected["eager" if mode == "eager" else "compiled"][k]
            if want is None:
                assert "error" not in got, (mode, k, _short(got))
                assert compare(values[0], got) is None, (mode, k, _short(got), _short(values[0]))
            else:
                assert "error" in got and got["error"][0] == want[0] and want[1] in got["error"][1], \
                    (mode, k, _short(got), want)


def test_generation_is_reproducible_and_readable() -> None:
    """A seed always gives the same program; its description is the source it runs."""
    for family in structural.FAMILIES:
        a, b = structural.generate(family, 12345), structural.generate(family, 12345)
        assert a.source == b.source and repr(a.calls) == repr(b.calls)
        assert a.source in a.describe() and ("def program" in a.source or "program = " in a.source)
        compile(a.script(), "<script>", "exec")


# -- command line -----------------------------------------------------------------------------

def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--family", action="append", help="a family (repeatable); default: all")
    parser.add_argument("--programs", type=int, default=N_PROGRAMS, help="programs per family")
    parser.add_argument("--seed", type=int, default=SEED, help="the first seed")
    parser.add_argument("--all-modes", action="store_true", help="every program in all three compiled modes")
    parser.add_argument("--dispatch", action="store_true",
                        help="also call each program eagerly without disable_jit (see the docstring)")
    parser.add_argument("--show", type=int, default=SHOW, help="mismatching programs to print")
    parser.add_argument("--script", action="store_true", help="print the reproducer script of each program")
    parser.add_argument("--json", help="write the mismatches to this file")
    args = parser.parse_args(argv)
    if args.child:
        return child_main()
    families = args.family or list(structural.FAMILIES)
    if args.script:
        for family in families:
            for seed in range(args.seed, args.seed + args.programs):
                print(structural.generate(family, seed).script())
        return 0
    everything = []
    children = Children()
    try:
        for family in families:
            counts: collections.Counter = collections.Counter()
            t0 = time.perf_counter()
            found = run_family(children, family, list(range(args.seed, args.seed + args.programs)), counts,
                               all_modes=args.all_modes or ALL_MODES, dispatch=args.dispatch)
            everything.extend(found)
            print(f"{family}: {_fmt(counts)}, {len(found)} mismatches in "
                  f"{len({m['seed'] for m in found})} programs ({time.perf_counter() - t0:.1f} s)", flush=True)
    finally:
        children.kill()
    if everything:
        print(report(everything, args.show))
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))
    return 1 if everything else 0


if __name__ == "__main__":
    sys.exit(main())
