"""Random *structural* programs for the differential fuzzer ``tests/test_structural_fuzz.py``.

A program is Python source: a function ``program(w, xs, i0, i1, i2, iv[, n])`` that combines
``jta.TensorArray`` ops (write, read, stack, gather, scatter, unstack, split, concat, size, the
gradient accumulators of ``ta.grad`` and ``jta.gradients``) and ``jta.raw_ops`` (create, write,
read, gather, scatter, size, concat, TensorArrayGradV3) with program structure: ``lax.scan``
(swapped carries ``(a, b) -> (b.write(i, x), a)`` included, reversed, unrolled),
``lax.fori_loop`` (static and traced bounds), ``lax.while_loop`` (exits on a counter, on a traced
bound, or on a value read from an array, possibly past its end), ``lax.cond``/``lax.switch``,
``jax.checkpoint``, ``jax.custom_vjp``/``jax.custom_jvp`` (TensorArray ops in the primal and in
the rules), nested ``jax.jit`` with static arguments (arrays passed through it), ``jax.vmap``
inside and around the program, ``jax.grad``/``value_and_grad``/``jvp``/``vjp`` inside and around
it, ``jta.checkify`` inside it (plain and vmapped, its error raised again with ``jta.throw``),
``jax.shard_map`` over simulated CPU devices (and its gradient), arrays made inside and outside
loops, dropped or returned (arrays and raw-op states themselves too), input shapes that change
across calls, Python-int and (under x64) int64 indices.

Arguments: ``w`` a float32 scalar (the differentiated one), ``xs`` float32 ``[N, 2]``, ``i0..i2``
int32 scalars (batched under an outer vmap) and ``iv`` an int32 ``[3]`` vector: indices, in range
most of the time, sometimes out of range, so the errors are data dependent; ``n`` a static Python
int (when the program is a ``jax.jit`` with static arguments). Every value a program computes is
folded (order sensitive, ``fold`` in :data:`PRELUDE`) into a float scalar, which it returns with a
few full arrays. The first call's indices mostly fit; about a third of all calls end in an error.

Generation is seeded and reproducible: ``generate(family, seed)`` always gives the same
:class:`Program`, whose ``source`` is readable Python, ``describe()`` the source with its calls
and the command that reruns it, and ``script()`` a standalone reproducer (the program, its calls,
and a driver printing the four modes side by side). ``FAMILIES`` lists the structure families;
each family puts its structure at the top of every program and mixes others below it (``mixed``
draws them all). ``REGRESSIONS`` holds one minimal program per mismatch class found so far;
``DIFFERENCES`` the programs where eager and compiled code differ by design, with each mode's outcome.

What the generator avoids, because eager and compiled code differ there by design (the eager
reference would be meaningless), each a documented rule or a JAX limitation:

* static indices (Python ints, literal index vectors) out of range or duplicated: they raise while
  tracing, before an earlier error recorded at a traced value (README "Errors inside jit");
* reads of a gradient accumulator past its size (eagerly they grow it; at a traced index they
  cannot: README "Sizes are static");
* ``split()`` of an array that a cond's branches or a loop carry (it changes the array's static
  structure: the ArrayMeta hint);
* ``while_loop`` under ``jax.grad`` (eagerly a Python loop, which JAX differentiates; compiled,
  JAX refuses), and ``while_loop`` predicates that ``vmap`` batches;
* ``while_loop``/``cond`` where JAX traces even eagerly (a ``jax.checkpoint`` body, the branches of
  a cond whose predicate vmap batched): there JAX binds them as primitives, run compiled with
  jta's host-callback checks. ``remat`` (PRELUDE) is the identity eagerly, so its body may hold
  them; JAX's eager ``shard_map`` runs primitives compiled per device, so ``shard_map`` (PRELUDE)
  is a Python loop over the shards eagerly (the reference: the first failing device's first error);
* custom_jvp rules that are not linear in the tangents, or that take a traced index through
  ``nondiff_argnums`` (JAX itself fails under jit there, TensorArrays or not).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Optional

import numpy as np

# The names a program's source may use (also the head of every reproducer script).
PRELUDE = '''\
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

import jta
from jta import gradients as G
from jta import raw_ops as ops

f32 = jnp.float32


def fold(acc, v):
    """acc * 1.25 + a position-weighted sum of v: order sensitive, differentiable."""
    v = jnp.ravel(jnp.asarray(v).astype(f32))
    return acc * 1.25 + jnp.sum(v * (1.0 + jnp.arange(v.size, dtype=f32) / 8))


def remat(fn, **kw):
    """jax.checkpoint(fn, **kw); eagerly (under jax.disable_jit()) fn itself: jax.checkpoint
    traces fn even then, so a while_loop or cond in it would run compiled, not op by op."""
    return fn if jax.config.jax_disable_jit else jax.checkpoint(fn, **kw)


def shard_map(fn, k, xs, *rest):
    """jax.shard_map of fn over k simulated CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count):
    xs split by rows, the rest replicated, the per-device results concatenated.

    Eagerly (under jax.disable_jit()) a Python loop over the shards, device 0 first: JAX's own
    eager shard_map runs each primitive compiled per device, so its checks would be host callbacks
    that raise later, if at all. The reference is thus "the first error of the first failing device".
    """
    if jax.config.jax_disable_jit:
        return jnp.concatenate([fn(x, *rest) for x in jnp.split(xs, k)])
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:k]), ("x",))
    return jax.shard_map(fn, mesh=mesh, in_specs=(P("x"),) + (P(),) * len(rest), out_specs=P("x"),
                         check_vma=False)(xs, *rest)
'''

# Structure families: the parametrize ids of the fuzzer (one family runs with ``-k <family>``).
FAMILIES = (
    "straight",        # no control flow: TensorArray, raw-op and accumulator ops only
    "scan",            # lax.scan: carried, closed-over and body-made arrays
    "scan-swap",       # lax.scan with swapped carries (a, b) -> (b.write(i, x), a)
    "fori",            # lax.fori_loop, static (a scan) and traced (a while) bounds
    "while",           # lax.while_loop exiting on a counter or a traced bound
    "while-readexit",  # lax.while_loop exiting on a value read from an array (maybe past its end)
    "jta-while",       # jta.while_loop / jta.fori_loop (traced bounds) differentiated, bound or not
    "cond",            # lax.cond / lax.switch with arrays through the branches
    "checkpoint",      # jax.checkpoint
    "custom-vjp",      # jax.custom_vjp with TensorArray ops in primal, fwd and bwd
    "jit-static",      # nested jax.jit with static arguments, the program jitted with a static n
    "vmap-in",         # jax.vmap of a part of the program
    "vmap-out",        # jax.vmap of the whole program
    "grad",            # jax.value_and_grad of the whole program (and grad inside)
    "raw",             # jta.raw_ops states through the structures
    "accum",           # gradient accumulators (ta.grad, jta.gradients rules)
    "shapes",          # array sizes from the input shape; the shape changes across calls
    "shard-map",       # jax.shard_map over simulated CPU devices
    "mixed",           # everything, nested
)
# Families whose programs need simulated devices (run in a subprocess, tests/test_structural_fuzz.py).
DEVICES = 4

CONSTS = ("0.5", "1.5", "2.0", "-1.0", "0.25")
STRUCTURES = ("scan", "scan-swap", "fori", "while", "cond", "switch", "checkpoint", "custom-vjp",
              "jit-static", "vmap-in", "grad-in", "checkify-in", "custom-jvp", "composite")
N_DEFAULT = 4  # rows of xs (a family other than "shapes")
B = 2  # batch of the vmapped families


@dataclasses.dataclass
class Program:
    """One generated program: its source, its calls, and how the harness must run it."""

    family: str
    seed: int
    source: str  # defines ``program`` (after PRELUDE)
    calls: list  # argument tuples (numpy values; a static ``n`` as a Python int)
    static_argnums: tuple = ()  # of ``program`` (a jax.jit with static_argnums)
    may_hang: bool = False  # a while_loop exits on a value read from an array
    # jta.checked only: it reverses a jta.while_loop without maximum_iterations (refused elsewhere,
    # naming jta.checked), or takes a Python bool index (a bare jax.jit traces it as a bool)
    checked_only: bool = False
    devices: int = 1  # simulated devices it needs
    features: tuple = ()  # the structures and ops it uses (for the mismatch report)
    x64: bool = False  # runs under jax.enable_x64(True) (index arguments are int64)
    note: str = ""  # a regression's diagnosis

    def build(self) -> Any:
        """The ``program`` function (the source executed in a fresh namespace)."""
        namespace = dict(_prelude_namespace())
        code = compile(self.source, f"<structural {self.family} seed={self.seed}>", "exec")
        exec(code, namespace)  # noqa: S102 - generated test programs
        return namespace["program"]

    def describe(self) -> str:
        """The program and its calls, readable (what a failing seed prints)."""
        calls = "\n".join(f"#   call {k}: {_call_repr(c)}" for k, c in enumerate(self.calls))
        return (f"# family {self.family!r}, seed {self.seed} (python -m tests.test_structural_fuzz "
                f"--family {self.family} --seed {self.seed} --programs 1 --show 1)\n"
                f"# static_argnums={self.static_argnums} may_hang={self.may_hang} devices={self.devices} "
                f"x64={self.x64}\n"
                f"{calls}\n{self.source}")

    def script(self) -> str:
        """A standalone reproducer: the program, its calls and the four modes side by side."""
        env = ""
        if self.x64:
            env += "import jax\njax.config.update('jax_enable_x64', True)\n"
        if self.devices > 1:
            env = ("import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count="
                   f"{DEVICES}'\nos.environ.setdefault('JAX_PLATFORMS', 'cpu')\n")
        calls = ",\n    ".join(_call_repr(c) for c in self.calls)
        note = "".join(f"# {line}\n" for line in self.note.splitlines())
        note += "# (Another jta: PYTHONPATH=<a tree holding jta/> python <this file>; e.g. the tree of\n" \
                "#  git archive <commit> jta | tar -x -C /tmp/tree)\n"
        return (f"# Reproducer: family {self.family!r}, seed {self.seed}\n{note}{env}{PRELUDE}\n\n{self.source}\n\n"
                f"CALLS = [\n    {calls},\n]\nSTATIC_ARGNUMS = {self.static_argnums!r}\n\n{DRIVER}")


DRIVER = '''\
def outcome(thunk):
    try:
        out = thunk()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"[:400]
    leaves = [x for p, x in jax.tree_util.tree_leaves_with_path(out)  # (an array's flow differs by design)
              if "flow" not in jax.tree_util.keystr(p)]
    return "ok " + np.array2string(np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in leaves]
                                                  or [np.zeros(0)]), precision=5)


def dynamic(args):
    return tuple(a for k, a in enumerate(args) if k not in STATIC_ARGNUMS)


def eager(args):
    with jax.disable_jit():
        return jta.throw(program(*args))


checked = jta.checked(program)
jitted = jax.jit(jta.checkify(program), static_argnums=STATIC_ARGNUMS)


def jit_checkify(args):
    errors, out = jitted(*args)
    jta.throw(errors)
    return out


def exported(args):
    exp = jax.export.export(jax.jit(jta.checkify(program), static_argnums=STATIC_ARGNUMS))(*args)
    exp = jax.export.deserialize(exp.serialize())
    dyn = dynamic(args)
    if exp.nr_devices > 1:  # called on as many devices as it was exported for
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:exp.nr_devices]), ("x",))
        dyn = jax.device_put(dyn, jax.sharding.NamedSharding(mesh, P()))
    errors, out = exp.call(*dyn)
    jta.throw(errors)
    return out


if __name__ == "__main__":
    for k, args in enumerate(CALLS):
        print(f"call {k}")
        for mode, run in (("eager", eager), ("checked", lambda a: checked(*a)),
                          ("jit(checkify)", jit_checkify), ("export", exported)):
            print(f"  {mode:14s}", outcome(lambda: run(args)))
'''


def _call_repr(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, np.ndarray):
            parts.append(f"np.array({a.tolist()!r}, np.{a.dtype})")
        elif isinstance(a, np.generic):
            parts.append(f"np.{a.dtype}({a.item()!r})")
        else:
            parts.append(repr(a))
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


_NAMESPACE: Optional[dict] = None


def _prelude_namespace() -> dict:
    global _NAMESPACE
    if _NAMESPACE is None:
        ns: dict = {}
        exec(compile(PRELUDE, "<structural prelude>", "exec"), ns)  # noqa: S102
        _NAMESPACE = ns
    return _NAMESPACE


# -- the generator's model of a program's variables -------------------------------------------

@dataclasses.dataclass(eq=False)
class V:
    """A variable of the generated source."""

    name: str
    kind: str  # "ta" | "f" (float value) | "i" (int32 scalar) | "raw" (raw-op state)
    shape: tuple = ()  # f: value shape; ta: element shape
    size: Any = None  # ta: an int, or "N" (xs.shape[0])
    dyn: bool = False  # ta: dynamic_size with a capacity
    cap: int = 0
    accum: bool = False  # ta: a gradient accumulator
    tname: str = ""  # ta: tensor_array_name ("" = default)
    fresh: bool = False  # ta: nothing written yet
    batched: bool = False  # i: batched by a vmap of this scope
    hi: int = 9  # i: an upper bound of the value (loop counters)
    slot: Optional[int] = None  # ta / raw: the carry slot it fills in the enclosing structure
    handles: tuple = ()  # raw: the state's arrays (RawH), shared by its versions
    owned: bool = True  # raw: may create arrays (not a carried or closed-over state)
    written: set = dataclasses.field(default_factory=set)  # ta: index expressions written ("*": all),
    # shared by every version of one array (an over-approximation across branches)
    looped: bool = False  # ta / raw: carried by an enclosing loop (a write there repeats every step)
    split: bool = False  # ta: split() (part of the array's static structure, ArrayMeta.marked_size)

    def tatype(self) -> tuple:
        return (self.size, self.shape, self.dyn, self.cap, self.accum, self.tname, self.split)


@dataclasses.dataclass(eq=False)
class RawH:
    """One array of a raw-op state: its handle and flow variables, size, element shape."""

    h: str
    f: str
    size: int
    shape: tuple
    car: bool  # clear_after_read
    grad: bool = False  # a gradient accumulator (reads kept within its size: see Generator.grad_index)
    written: set = dataclasses.field(default_factory=set)
    read: set = dataclasses.field(default_factory=set)


class Scope:
    """The variables a piece of generated code can use; a child sees its parent's (closure)."""

    def __init__(self, parent: Optional[Scope] = None, *, sealed: bool = False, vmapped: Optional[bool] = None,
                 grad: Optional[bool] = None, depth: Optional[int] = None, traced: bool = False):
        self.vars: list[V] = []
        if parent is not None and not sealed:
            for v in parent.vars:
                self.vars.append(dataclasses.replace(v, slot=None, owned=False if v.kind == "raw" else v.owned))
        self.vmapped = parent.vmapped if vmapped is None and parent else bool(vmapped)
        self.grad = parent.grad if grad is None and parent else bool(grad)
        # Eagerly (under jax.disable_jit()) this code is traced to a jaxpr, then evaluated: a
        # jax.checkpoint body, the branches of a cond whose predicate vmap batched. A scan there
        # still runs as a Python loop (unrolled into the jaxpr), but a while_loop or a cond would
        # be bound as primitives, i.e. compiled with the host-callback checks: no reference.
        self.traced = traced or bool(parent and parent.traced)
        self.depth = (parent.depth + 1 if parent else 0) if depth is None else depth
        self.acc = ""
        self.w = parent.w if parent and not sealed else "w"
        self.xs = parent.xs if parent and not sealed else ""
        self.xs_rows: Any = parent.xs_rows if parent and not sealed else N_DEFAULT

    def of(self, kind: str) -> list[V]:
        return [v for v in self.vars if v.kind == kind]

    def tas(self) -> list[V]:
        return self.of("ta")


def _render(shape) -> str:
    items = [str(d) for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class Generator:
    """Writes one program of a family from a seed (see the module docstring)."""

    def __init__(self, family: str, seed: int):
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; one of {FAMILIES}")
        self.family = family
        self.seed = seed
        self.rng = random.Random(f"{family}/{seed}")
        self.lines: list[str] = []
        self.indent = 1
        self.count = 0
        self.features: set[str] = set()
        self.may_hang = False
        self.checked_only = False
        self.kinds: dict[str, str] = {}
        self.n_min = 3 if family == "shapes" else N_DEFAULT  # the fewest rows xs has in a call
        self.static_n = False
        self.x64 = False
        self.sym_lo: dict[str, int] = {"n": 2}  # static sizes: their smallest value

    # -- emission helpers ----------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def choice(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def lo(self, size) -> int:
        """The smallest value ``size`` (an int, "N" = xs.shape[0], or a static argument's name)
        takes over the calls."""
        if isinstance(size, int):
            return size
        return self.n_min if size == "N" else self.sym_lo.get(size, 2)

    def fold(self, sc: Scope, expr: str) -> None:
        new = self.fresh("acc")
        self.emit(f"{new} = fold({sc.acc}, {expr})")
        sc.acc = new

    def replace(self, sc: Scope, old: V, new: V) -> None:
        """``new`` is the next version of ``old`` (it takes its carry slot); ``old`` stays
        readable as a value (arrays are values), but is not written again."""
        new.slot, old.slot = old.slot, None
        idx = sc.vars.index(old)
        sc.vars[idx] = new
        if self.chance(0.15):  # keep the old version alive too (value semantics)
            sc.vars.append(dataclasses.replace(old, name=old.name, slot=None, fresh=False))

    # -- indices and values ----------------------------------------------------------------------
    def index_vars(self, sc: Scope) -> list[V]:
        """The integers an index may use. Where JAX traces even eagerly (``Scope.traced``: a
        jax.checkpoint body, the branches of a cond whose predicate vmap batched) every integer
        but a vmapped argument is concrete, and jta checks an index it can see while tracing: an
        out-of-range one raises there, before errors recorded earlier at traced values, and for
        a branch that no member takes (documented, ``DIFFERENCES``). There, only the vmapped
        arguments may be out of range; the other integers index in range (:meth:`index`)."""
        ints = sc.of("i")
        if sc.traced:
            return [v for v in ints if v.batched and v.name in ("i0", "i1", "i2")]
        return ints

    def index(self, sc: Scope, size) -> str:
        """A scalar index for an array of ``size``: a static one in range, or a traced one."""
        ints = self.index_vars(sc)
        lo = self.lo(size)
        if sc.traced and not ints and sc.of("i") and lo > 0 and self.chance(0.5):  # concrete, in range
            return f"jnp.clip({self.choice(sc.of('i')).name}, 0, {lo - 1})"
        if not ints and lo == 0:
            ints = sc.of("i")  # nothing is in range: any index fails, eagerly and compiled alike
        if lo > 0 and (not ints or self.chance(0.2)):
            return str(self.rng.randrange(lo))
        v = self.choice(ints)
        form = self.choice(["{v}", "{v}", "{v}", "{v}", "jnp.minimum({v}, {m})", "jnp.minimum({v}, {m})",
                            "{v} + 1", "{m} - {v}", "({v} * 2) % 5"])
        return form.format(v=v.name, m=max(lo - 1, 0))

    def grad_index(self, sc: Scope, size) -> str:
        """An index to read a gradient accumulator at: never past its size. (Eagerly such a read
        grows the accumulator, as TensorFlow's does; at a traced index it cannot grow a static
        buffer and reports "beyond the static capacity": documented, README "Sizes are static".)"""
        return f"jnp.minimum({self.index(sc, size)}, {self.lo(size) - 1})"

    def write_index(self, sc: Scope, ta: V) -> str:
        """An index to write ``ta`` at: mostly one not written yet (a double write is an error
        every time); in a loop that carries ``ta``, mostly the loop counter."""
        counters = [v for v in sc.of("i") if v.name.startswith("t")]
        if ta.looped and counters and not sc.traced and self.chance(0.85):  # (traced: index_vars)
            expr = counters[-1].name
        else:
            expr = self.index(sc, ta.size)
            for _ in range(4):
                if expr not in ta.written:
                    break
                expr = self.index(sc, ta.size)
        ta.written.add(expr)
        return expr

    def indices(self, sc: Scope, size, k: int, distinct: bool = False) -> str:
        """``k`` indices: literal ones (in range, distinct), or traced ones."""
        lo = self.lo(size)
        r = self.rng.random()
        if r < 0.3 and lo >= k:
            picks = self.rng.sample(range(lo), k) if distinct or self.chance(0.5) else \
                [self.rng.randrange(lo) for _ in range(k)]
            return f"jnp.array({picks!r}, jnp.int32)"
        if r < 0.6 or not sc.of("i") or sc.traced:
            if not sc.of("i"):
                return f"jnp.arange({k}, dtype=jnp.int32)"
            return "jnp.stack([" + ", ".join(self.index(sc, size) for _ in range(k)) + "]).astype(jnp.int32)"
        if r < 0.8 and not sc.vmapped:
            return f"iv[:{k}]" if "iv" in [v.name for v in sc.of("i")] or self._top_iv(sc) else \
                f"jnp.arange({k}, dtype=jnp.int32)"
        base = self.choice(sc.of("i")).name
        return f"(jnp.arange({k}, dtype=jnp.int32) + {base})"

    def _top_iv(self, sc: Scope) -> bool:
        return sc.xs == "xs"  # the top-level arguments are visible (not a sealed scope)

    def value(self, sc: Scope, shape: tuple) -> str:
        """A float32 value of ``shape`` (ints or "N"), built from the scope's floats, w and xs."""
        same = [v for v in sc.of("f") if v.shape == shape]
        c = self.choice(CONSTS)
        r = self.rng.random()
        counter = [v for v in sc.of("i") if v.name.startswith("t")]
        extra = f" + jnp.asarray({counter[-1].name}, f32)" if counter and self.chance(0.3) else ""
        if same and r < 0.5:
            return f"{self.choice(same).name} * {c} + {sc.w}{extra}"
        if shape == ():
            return f"{sc.w} * {c}{extra}"
        if sc.xs and shape == (sc.xs_rows, 2) and r < 0.8:
            return f"{sc.xs} * {sc.w}{extra}"
        if sc.xs and shape == (2,) and r < 0.75:
            rows = self.lo(sc.xs_rows)
            return f"{sc.xs}[{self.rng.randrange(rows)}] * {sc.w}{extra}"
        if sc.xs and len(shape) == 2 and shape[1] == 2 and r < 0.8 and isinstance(shape[0], int) \
                and shape[0] <= self.lo(sc.xs_rows):
            return f"{sc.xs}[:{shape[0]}] * {sc.w}{extra}"
        return f"jnp.full({_render(shape)}, {c}, f32) * {sc.w}{extra}"

    def float_var(self, sc: Scope, expr: str, shape: tuple, out: bool = False) -> V:
        name = self.fresh("v")
        self.emit(f"{name} = {expr}")
        v = V(name, "f", shape=shape)
        sc.vars.append(v)
        self.fold(sc, name)
        if out and sc.depth == 0 and self.chance(0.5):
            self.outs.append(name)
        return v

    # -- TensorArray statements --------------------------------------------------------------
    def new_ta(self, sc: Scope, *, size=None, shape=None, dyn=None, tname=None, fill=None) -> V:
        rng = self.rng
        if size is None:
            size = self.choice([2, 3, 3, 4]) if self.family != "shapes" or self.chance(0.4) else "N"
            if self.static_n and sc.depth == 0 and self.chance(0.4):
                size = "n"
        shape = self.choice([(), (2,), (2,)]) if shape is None else shape
        dyn = (self.chance(0.15) and size != "N" and size != "n") if dyn is None else dyn
        if tname is None:
            tname = self.fresh("t") if self.chance(0.7) else ""
        name = self.fresh("a")
        args = ["f32", f"size={size}" if not dyn else f"size={rng.randrange(0, 2)}",
                f"element_shape={_render(shape)}"]
        cap = 0
        if dyn:
            cap = rng.choice([3, 4])
            args += ["dynamic_size=True", f"capacity={cap}"]
        if tname:
            args.append(f"tensor_array_name={tname!r}")
        expr = f"jta.TensorArray({', '.join(args)})"
        ta = V(name, "ta", shape=shape, size=size if not dyn else cap, dyn=dyn, cap=cap, tname=tname, fresh=True)
        if size == "n":
            ta.size = "n"
        fill = self.chance(0.5) if fill is None else fill
        if fill:
            rows = self.lo(ta.size) if not dyn else rng.randrange(1, cap + 1)
            rows_expr = ta.size if (not dyn and not isinstance(ta.size, int)) else rows
            expr += f".unstack({self.value(sc, (rows_expr, *shape))})"
            ta.fresh = False
            ta.written.add("*" if rows_expr == ta.size or rows == self.lo(ta.size) else "unstack")
            self.features.add("unstack")
        self.emit(f"{name} = {expr}")
        sc.vars.append(ta)
        return ta

    def lo_size(self, ta: V) -> int:
        return self.lo(ta.size)

    def ta_op(self, sc: Scope) -> None:
        """One op on an array of the scope (a new array when there is none)."""
        tas = sc.tas()
        if not tas or self.chance(0.12):
            self.new_ta(sc)
            return
        carried = [t for t in tas if t.slot is not None]  # what the enclosing structure carries
        ta = self.choice(carried) if carried and self.chance(0.65) else self.choice(tas)
        size = ta.size
        ops = ["write"] * 5 + ["read"] * 4 + ["gather"] * 2 + ["scatter"] * 2 + ["size"]
        if not ta.dyn:
            ops += ["stack"] * 2
            if ta.shape == (2,):
                ops += ["concat"]
                # (not an array the enclosing cond or loop carries: split() changes its static
                # structure, which a branch's outputs and a loop's carry must keep: documented,
                # the ArrayMeta hint "split the array before the cond or loop")
                if not ta.written and not ta.looped and isinstance(ta.size, int) and not ta.accum \
                        and ta.slot is None:
                    ops += ["split"] * 2
            if not ta.written and not ta.looped and not ta.accum:
                ops += ["unstack"] * 2
        op = self.choice(ops)
        if op in ("write", "scatter") and ("*" in ta.written or (ta.looped and op == "scatter")) \
                and not ta.accum and self.chance(0.85):
            op = "read"  # every slot is written: a write would fail
        self.features.add(op)
        if op in ("write", "scatter", "unstack", "split"):
            new = dataclasses.replace(ta, name=self.fresh("a"), fresh=False)
            if op == "write":
                value = self.value(sc, ta.shape)
                if ta.shape == (2,) and self.chance(0.1):  # a list of (maybe traced) scalars: TF packs it
                    value = f"[{sc.w} * {self.choice(CONSTS)}, {self.choice(CONSTS)}]"
                    self.features.add("list-value")
                expr = f"{ta.name}.write({self.write_index(sc, ta)}, {value})"
            elif op == "scatter":
                k = self.rng.randrange(1, min(3, self.lo_size(ta)) + 1)
                idx = self.indices(sc, size, k, distinct=True)
                for _ in range(3):
                    if idx not in ta.written:
                        break
                    idx = self.indices(sc, size, k, distinct=True)
                ta.written.add(idx)
                if k >= 2 and self.lo_size(ta) <= k:
                    ta.written.add("*")
                expr = f"{ta.name}.scatter({idx}, {self.value(sc, (k, *ta.shape))})"
            elif op == "unstack":
                expr = f"{ta.name}.unstack({self.value(sc, (ta.size, *ta.shape))})"
                ta.written.add("*")
            else:
                expr = f"{ta.name}.split({self.value(sc, (2 * ta.size,))}, {[2] * ta.size!r})"
                ta.written.add("*")
                new.split = True
            self.emit(f"{new.name} = {expr}")
            self.replace(sc, ta, new)
            return
        if op == "read":
            self.float_var(sc, f"{ta.name}.read({self.index(sc, size)})", ta.shape, out=True)
        elif op == "gather":
            k = self.rng.randrange(1, 4)
            self.float_var(sc, f"{ta.name}.gather({self.indices(sc, size, k)})", (k, *ta.shape), out=True)
        elif op == "stack":
            self.float_var(sc, f"{ta.name}.stack()", (ta.size, *ta.shape), out=True)
        elif op == "concat":
            self.float_var(sc, f"{ta.name}.concat()", ("?",), out=True)
        else:
            self.fold(sc, f"{ta.name}.size()")

    def accum_op(self, sc: Scope) -> None:
        """Gradient accumulators: ``ta.grad`` and the ``jta.gradients`` rules, on one forward
        array of a unique name, with a registry local to this scope."""
        fwd = [t for t in sc.tas() if t.tname and not t.dyn and not t.accum and isinstance(t.size, int)]
        if not fwd:
            fwd = [self.new_ta(sc, dyn=False, tname=self.fresh("g"), size=self.choice([2, 3]))]
        ta = self.choice(fwd)
        self.features.add("accumulator")
        reg = self.fresh("reg")
        src = self.choice(["gradients", "gradients_1"])
        self.emit(f"{reg} = {{}}")
        for _ in range(self.rng.randrange(1, 4)):
            kind = self.choice(["grad", "read_grad", "read_grad", "gather_grad", "write_grad",
                                "scatter_grad", "unstack_grad", "stack_grad"])
            new = self.fresh("reg")
            if kind == "grad":
                fa, g = self.fresh("a"), self.fresh("g")
                self.emit(f"{fa}, {g}, {new} = {ta.name}.grad({src!r}, {reg})")
                for _ in range(self.rng.randrange(1, 3)):  # accumulators sum repeated writes
                    g2 = self.fresh("g")
                    op = self.choice(["write", "write", "read"])
                    if op == "write":
                        self.emit(f"{g2} = {g}.write({self.index(sc, ta.size)}, {self.value(sc, ta.shape)})")
                        g = g2
                    else:
                        self.float_var(sc, f"{g}.read({self.grad_index(sc, ta.size)})", ta.shape)
                new2 = self.fresh("reg")
                self.emit(f"{new2} = G.put({new}, {g})")
                new = new2
            elif kind == "read_grad":
                self.emit(f"{new} = G.read_grad({reg}, {ta.name}, {self.index(sc, ta.size)}, "
                          f"{self.value(sc, ta.shape)}, source={src!r})")
            elif kind == "gather_grad":
                k = self.rng.randrange(1, 3)
                self.emit(f"{new} = G.gather_grad({reg}, {ta.name}, {self.indices(sc, ta.size, k)}, "
                          f"{self.value(sc, (k, *ta.shape))}, source={src!r})")
            else:
                d = self.fresh("v")
                if kind == "write_grad":
                    self.emit(f"{new}, {d} = G.write_grad({reg}, {ta.name}, {self.grad_index(sc, ta.size)}, "
                              f"source={src!r})")
                    shape = ta.shape
                elif kind == "scatter_grad":
                    k = self.rng.randrange(1, 3)
                    self.emit(f"{new}, {d} = G.scatter_grad({reg}, {ta.name}, "
                              f"jnp.minimum({self.indices(sc, ta.size, k)}, {self.lo(ta.size) - 1}), source={src!r})")
                    shape = (k, *ta.shape)
                elif kind == "unstack_grad":
                    self.emit(f"{new}, {d} = G.unstack_grad({reg}, {ta.name}, source={src!r})")
                    shape = (ta.size, *ta.shape)
                else:
                    self.emit(f"{new} = G.stack_grad({reg}, {ta.name}, {self.value(sc, (ta.size, *ta.shape))}, "
                              f"source={src!r})")
                    d = ""
                if d:
                    sc.vars.append(V(d, "f", shape=shape))
                    self.fold(sc, d)
            reg = new

    def raw_op(self, sc: Scope) -> None:
        """``jta.raw_ops`` on a state of the scope (a new state when there is none)."""
        self.features.add("raw_ops")
        states = sc.of("raw")
        if not states or (self.chance(0.15) and sc.depth < 2):
            s = self.fresh("s")
            self.emit(f"{s} = ops.new_state()")
            st = V(s, "raw", owned=True)
            sc.vars.append(st)
        else:
            carried = [s for s in states if s.slot is not None]
            st = self.choice(carried) if carried and self.chance(0.65) else self.choice(states)
        if not st.handles or (st.owned and self.chance(0.2)):
            if not st.owned:
                st = V(self.fresh("s"), "raw", owned=True)
                self.emit(f"{st.name} = ops.new_state()")
                sc.vars.append(st)
            self._raw_create(sc, st)
            return
        arr = self.choice(st.handles)
        h, f, size, shape = arr.h, arr.f, arr.size, arr.shape
        new = self.fresh("s")
        kind = self.choice(["write", "write", "read", "read", "gather", "scatter", "size", "grad", "concat"])
        if kind == "grad" and (not st.owned or arr.grad):  # a gradient of a gradient: a static error,
            kind = "read"  # raised while tracing, before errors recorded earlier at traced values
        if kind == "concat" and (shape != (2,) or arr.car):
            kind = "read"
        if kind in ("write", "scatter") and "*" in arr.written and self.chance(0.85):
            kind = "read"
        if kind == "scatter" and st.looped:
            kind = "write"
        counters = [v.name for v in sc.of("i") if v.name.startswith("t")]
        self.features.add(f"raw_{kind}")
        if kind == "write":
            if st.looped and counters and not sc.traced and self.chance(0.85):
                idx = counters[-1]
            else:
                idx = self.index(sc, size)
                for _ in range(4):
                    if idx not in arr.written:
                        break
                    idx = self.index(sc, size)
            arr.written.add(idx)
            self.emit(f"{new}, _ = ops.TensorArrayWriteV3({st.name}, {h}, {idx}, {self.value(sc, shape)}, {f})")
        elif kind == "read":
            v = self.fresh("v")
            if arr.car and st.looped and counters and not sc.traced and self.chance(0.85):
                idx = counters[-1]
            else:
                idx = self.index(sc, size)
                for _ in range(4 if arr.car else 0):
                    if idx not in arr.read:
                        break
                    idx = self.index(sc, size)
            arr.read.add(idx)
            if arr.grad:
                idx = f"jnp.minimum({idx}, {size - 1})"
            self.emit(f"{new}, {v} = ops.TensorArrayReadV3({st.name}, {h}, {idx}, {f}, f32)")
            sc.vars.append(V(v, "f", shape=shape))
            self.fold(sc, v)
        elif kind == "gather":
            v, k = self.fresh("v"), self.rng.randrange(1, 3)
            idx = self.indices(sc, size, k)
            if arr.grad:
                idx = f"jnp.minimum({idx}, {size - 1})"
            self.emit(f"{new}, {v} = ops.TensorArrayGatherV3({st.name}, {h}, {idx}, {f}, f32)")
            sc.vars.append(V(v, "f", shape=(k, *shape)))
            self.fold(sc, v)
        elif kind == "scatter":
            k = self.rng.randrange(1, min(2, size) + 1)
            idx = self.indices(sc, size, k, distinct=True)
            arr.written.add(idx)
            self.emit(f"{new}, _ = ops.TensorArrayScatterV3({st.name}, {h}, {idx}, {self.value(sc, (k, *shape))}, {f})")
        elif kind == "size":
            v = self.fresh("v")
            self.emit(f"{new}, {v} = ops.TensorArraySizeV3({st.name}, {h}, {f})")
            self.fold(sc, v)
        elif kind == "concat":
            v, ln = self.fresh("v"), self.fresh("l")
            self.emit(f"{new}, {v}, {ln} = ops.TensorArrayConcatV3({st.name}, {h}, {f}, f32)")
            self.fold(sc, v)
        else:  # a gradient accumulator: a new handle of the same size
            gh, gf = self.fresh("h"), self.fresh("fl")
            self.emit(f"{new}, {gh}, {gf} = ops.TensorArrayGradV3({st.name}, {h}, {f}, 'gradients')")
            st.handles = st.handles + (RawH(gh, gf, size, shape, True, grad=True),)
        st.name = new

    def _raw_create(self, sc: Scope, st: V) -> None:
        h, f, new = self.fresh("h"), self.fresh("fl"), self.fresh("s")
        size, shape, car = self.choice([2, 3, 4]), self.choice([(), (2,)]), self.chance(0.6)
        name = f", tensor_array_name='r{self.count}'" if self.chance(0.5) else ""
        self.emit(f"{new}, {h}, {f} = ops.TensorArrayV3({st.name}, {size}, f32, element_shape={_render(shape)}, "
                  f"clear_after_read={car}{name})")
        st.name = new
        arr = RawH(h, f, size, shape, car)
        st.handles = st.handles + (arr,)
        self.features.add("raw_create")
        if self.chance(0.6):  # fill it
            arr.written.add("*")
            new = self.fresh("s")
            self.emit(f"{new}, _ = ops.TensorArrayScatterV3({st.name}, {h}, jnp.arange({size}), "
                      f"{self.value(sc, (size, *shape))}, {f})")
            st.name = new

    # -- statements --------------------------------------------------------------------------
    def statement(self, sc: Scope, structures: tuple) -> None:
        r = self.rng.random()
        allowed = [s for s in structures if self._allowed(sc, s)]
        if allowed and r < (0.25 if sc.depth == 0 else 0.12 if sc.depth == 1 else 0.0):
            self.structure(sc, self.choice(allowed))
        elif r < 0.45 and self.family in ("raw", "mixed", "straight"):
            self.raw_op(sc)
        elif r < 0.5 and self.family in ("accum", "mixed", "straight"):
            self.accum_op(sc)
        elif self.family == "raw" and r < 0.7:
            self.raw_op(sc)
        elif self.family == "accum" and r < 0.65:
            self.accum_op(sc)
        else:
            self.ta_op(sc)

    def block(self, sc: Scope, structures: tuple, lo: int = 1, hi: int = 2) -> None:
        """``lo`` to ``hi`` statements, few: every TensorArray op costs ~0.1 s of XLA compile time."""
        n = lo if hi <= lo or self.chance(0.6) else self.rng.randrange(lo + 1, hi + 1)
        for _ in range(n):
            self.statement(sc, structures)

    def _allowed(self, sc: Scope, s: str) -> bool:
        if sc.depth >= 3:
            return False
        if s in ("while", "while-readexit") and sc.grad:
            return False
        if s == "composite" and sc.grad:  # JAX has no JVP rule for lax.composite (jax 0.10)
            return False
        if sc.traced and s in ("while", "while-readexit", "jta-while", "cond", "switch", "shard-map"):
            return False
        return True

    def structure(self, sc: Scope, s: str) -> None:
        if s not in ("raw-ops", "accumulators") and not self._allowed(sc, s):
            s = "scan"  # (a while_loop under jax.grad, a cond where eager code traces)
        self.features.add(s)
        getattr(self, "s_" + s.replace("-", "_"))(sc)

    def s_raw_ops(self, sc: Scope) -> None:
        for _ in range(self.rng.randrange(2, 5)):
            self.raw_op(sc)

    def s_accumulators(self, sc: Scope) -> None:
        self.accum_op(sc)

    def nested(self) -> tuple:
        """The structures that may appear below the family's own."""
        if self.family in ("straight", "raw", "accum"):
            return ("scan", "cond") if self.family != "straight" else ()
        if self.family == "mixed":
            return STRUCTURES + ("while-readexit",)
        base = {"scan": ("scan", "cond", "checkpoint"), "scan-swap": ("scan-swap", "cond", "scan"),
                "fori": ("fori", "cond", "scan"), "while": ("while", "cond", "scan"),
                "jta-while": ("jta-while", "cond", "scan"),
                "while-readexit": ("cond", "scan"), "cond": ("cond", "switch", "scan"),
                "checkpoint": ("checkpoint", "scan", "cond", "composite"), "custom-vjp": ("scan", "cond", "checkpoint"),
                "jit-static": ("jit-static", "scan", "cond"), "vmap-in": ("vmap-in", "scan", "cond", "while"),
                "vmap-out": ("scan", "cond", "while", "fori"), "grad": ("scan", "cond", "grad-in", "custom-vjp",
                                                                        "custom-jvp", "checkpoint", "jta-while"),
                "shapes": ("scan", "fori", "cond"), "shard-map": ("scan", "cond")}
        return base[self.family]

    # -- carries: what a structure takes in and gives back ------------------------------------
    def carries(self, sc: Scope, k_max: int = 2, swap: bool = False) -> list[V]:
        """Arrays (and maybe a raw state) of ``sc`` to carry; with ``swap``, two of one type."""
        tas = [t for t in sc.tas()]
        out: list[V] = []
        if swap:
            base = [t for t in tas if not t.accum]
            if base and self.chance(0.5):
                a = self.choice(base)
            else:
                a = self.new_ta(sc)
            twins = [t for t in tas if t is not a and t.tatype() == a.tatype()]
            b = self.choice(twins) if twins and self.chance(0.5) else None
            if b is None:
                fill = self.chance(0.4)
                b = self.new_ta(sc, size=a.size, shape=a.shape, dyn=a.dyn, tname=a.tname, fill=fill) \
                    if not a.dyn and a.size in (2, 3, 4, "N", "n") else None
                if b is None or b.tatype() != a.tatype():
                    b = V(self.fresh("a"), "ta", **{k: getattr(a, k) for k in ("shape", "size", "dyn", "cap",
                                                                                   "accum", "tname", "split")})
                    self.emit(f"{b.name} = {a.name}")  # the same array, twice
                    sc.vars.append(b)
            a.written |= b.written
            b.written = a.written  # the two alternate in the slots: one history
            out = [a, b]
        else:
            self.rng.shuffle(tas)
            out = tas[:self.rng.randrange(0, k_max + 1)]
        raws = [s for s in sc.of("raw") if s.handles]
        if raws and self.chance(0.4):
            out.append(self.choice(raws))
        return out

    def enter(self, sc: Scope, carried: list[V], names: list[str], child: Scope, loop: bool = False) -> list[V]:
        """Bind the carried ``names`` in ``child`` (slots 0..k-1); ``loop``: a loop carries them."""
        inner = []
        for k, (v, nm) in enumerate(zip(carried, names, strict=True)):
            iv = dataclasses.replace(v, name=nm, slot=k, owned=False if v.kind == "raw" else v.owned,
                                     looped=v.looped or loop)
            # the closed-over copy of a carried variable is still readable; the carried one is new
            child.vars.append(iv)
            inner.append(iv)
        return inner

    def leave(self, child: Scope, k: int, swap: bool = False) -> list[str]:
        """The names that fill slots 0..k-1 at the end of ``child`` (swapped: slot 0 <-> 1)."""
        out = []
        for slot in range(k):
            holders = [v for v in child.vars if v.slot == slot]
            out.append(holders[-1].name)
        if swap and k >= 2:
            out[0], out[1] = out[1], out[0]
        return out

    def rebind(self, sc: Scope, carried: list[V], names: list[str]) -> None:
        """After a structure: the outer variables ``carried`` are replaced by ``names``."""
        for v, nm in zip(carried, names, strict=True):
            new = dataclasses.replace(v, name=nm, fresh=False if v.kind == "ta" else v.fresh)
            if v in sc.vars:
                sc.vars[sc.vars.index(v)] = new
                new.slot = v.slot
            else:
                sc.vars.append(new)

    # -- the structures --------------------------------------------------------------------------
    def _loop(self, sc: Scope, kind: str, swap: bool = False) -> None:
        carried = self.carries(sc, swap=swap)
        fn = self.fresh({"scan": "scan_body", "fori": "fori_body", "while": "while_body", "jta-fori": "fori_body",
                         "jta-while": "while_body"}[kind])
        whiles, foris = ("while", "jta-while"), ("fori", "jta-fori")
        cnames = [self.fresh("c") for _ in carried]
        acc_in = self.fresh("cacc")
        child = Scope(sc)
        t = self.fresh("t")
        sizes = [c.size for c in carried if c.kind == "ta" and not c.dyn]
        if sizes and self.chance(0.8):  # as many steps as the carried arrays have slots (or one more)
            length = min(sizes, key=self.lo)
            if self.chance(0.2):
                length = self.lo(length) + 1
        else:
            length = self.choice([2, 3, 4, 5]) if self.family != "shapes" or self.chance(0.5) else "N"
        if kind == "scan":
            self.emit(f"def {fn}(carry, {t}):")
        elif kind in foris:
            self.emit(f"def {fn}({t}, carry):")
        else:
            self.emit(f"def {fn}(carry):")
        self.indent += 1
        if kind in whiles:
            self.emit(f"{t}, ({', '.join(cnames + [acc_in])},) = carry")
        else:
            self.emit(f"({', '.join(cnames + [acc_in])},) = carry")
        self.enter(sc, carried, cnames, child, loop=True)
        child.vars.append(V(t, "i", hi=(length if isinstance(length, int) else 9)))
        child.acc = acc_in
        if self.chance(0.3):  # an array made inside the loop
            self.new_ta(child)
        self.block(child, self.nested(), 1, 2)
        if swap:  # (a, b) -> (b.write(t, x), a)
            b = [v for v in child.vars if v.slot == 1][-1]
            if b.kind == "ta" and not b.dyn or self.chance(0.5):
                new = dataclasses.replace(b, name=self.fresh("a"), fresh=False)
                self.emit(f"{new.name} = {b.name}.write({self.write_index(child, b)}, {self.value(child, b.shape)})")
                self.replace(child, b, new)
        outs = self.leave(child, len(carried), swap=swap)
        if kind == "scan":
            self.emit(f"return ({', '.join(outs + [child.acc])},), {child.acc} * 0.5")
        elif kind in foris:
            self.emit(f"return ({', '.join(outs + [child.acc])},)")
        else:
            self.emit(f"return {t} + 1, ({', '.join(outs + [child.acc])},)")
        self.indent -= 1
        new_names = [self.fresh("a" if v.kind == "ta" else "s") for v in carried]
        acc_out = self.fresh("acc")
        lhs = f"({', '.join(new_names + [acc_out])},)"
        init = f"({', '.join([v.name for v in carried] + [sc.acc])},)"
        if kind == "scan":
            ys = self.fresh("ys")
            rev = ", reverse=True" if self.chance(0.25) else ""
            rev += ", unroll=2" if self.chance(0.15) else ""
            self.emit(f"{lhs}, {ys} = lax.scan({fn}, {init}, jnp.arange({length}){rev})")
            sc.acc = acc_out
            self.fold(sc, ys)
        elif kind in foris:
            hi = str(length)
            ints = [v for v in sc.of("i") if not (sc.vmapped and v.batched) or kind == "jta-fori"]
            if ints and (kind == "jta-fori" or not sc.grad) and not sc.traced and self.chance(0.5):
                pick = self.choice(ints).name
                hi = f"jnp.minimum({pick}, 5)"  # traced: a while loop
                if self.kinds.get(pick, "default").startswith("uint"):  # fori_loop wants both bounds signed
                    hi = f"jnp.minimum({pick}, 5).astype(jnp.int32)"
                self.features.add("fori-traced")
            loop = "jta.fori_loop" if kind == "jta-fori" else "lax.fori_loop"
            self.emit(f"{lhs} = {loop}(0, {hi}, {fn}, {init}{self.bound(sc, kind)})")
            sc.acc = acc_out
        else:
            cond = self.fresh("while_cond")
            ints = [v for v in sc.of("i") if not (sc.vmapped and v.batched)]
            if ints and self.chance(0.6):
                # Under x64 an index may be 2**33 + 1: a loop bound that large never ends, eagerly too.
                # So may an unsigned one past 2**31 (an index -1 wraps to it).
                pick = self.choice(ints).name
                limit = f"jnp.minimum({pick}, 5)" if self.chance(0.5) or self.x64 or \
                    self.kinds.get(pick, "default").startswith("uint") else pick
                self.features.add("while-traced-exit")
            else:
                limit = str(length)
            self.emit(f"def {cond}(carry):")
            self.emit(f"    return carry[0] < {limit}")
            tn = self.fresh("t")
            loop = "jta.while_loop" if kind == "jta-while" else "lax.while_loop"
            self.emit(f"{tn}, {lhs} = {loop}({cond}, {fn}, (jnp.int32(0), {init}){self.bound(sc, kind)})")
            sc.acc = acc_out
            self.fold(sc, tn)
        self.rebind(sc, carried, new_names)

    def bound(self, sc: Scope, kind: str) -> str:
        """``maximum_iterations=`` of a ``jta`` loop (sometimes fewer steps than the loop would run:
        it stops there, silently), or none: reversing that needs ``jta.checked``'s plan."""
        if not kind.startswith("jta-"):
            return ""
        bound = self.choice([None, 2, 3, 6])
        if bound is None and sc.grad and sc.vmapped:  # eagerly only concrete loops know their length
            bound = 6
        if bound is None:
            self.checked_only = self.checked_only or sc.grad
            return ""
        self.features.add("loop-bound")
        return f", maximum_iterations={bound}"

    def s_scan(self, sc: Scope) -> None:
        self._loop(sc, "scan")

    def s_jta_while(self, sc: Scope) -> None:
        self._loop(sc, self.choice(["jta-while", "jta-while", "jta-fori"]), swap=self.chance(0.2))

    def s_scan_swap(self, sc: Scope) -> None:
        self._loop(sc, self.choice(["scan", "scan", "fori", "while"]) if not (sc.grad or sc.traced) else "scan",
                   swap=True)

    def s_fori(self, sc: Scope) -> None:
        self._loop(sc, "fori", swap=self.chance(0.2))

    def s_while(self, sc: Scope) -> None:
        self._loop(sc, "while", swap=self.chance(0.2))

    def s_while_readexit(self, sc: Scope) -> None:
        """A while loop that exits on a value read from an array: eagerly, a read past the end
        raises at once; compiled code reads a clamped slot, and may never exit."""
        if sc.grad or sc.vmapped:
            return self.s_scan(sc)
        self.may_hang = True
        size = self.choice([2, 3, 4])
        src = self.fresh("src")
        self.emit(f"{src} = jta.TensorArray(f32, size={size}, element_shape=(), "
                  f"tensor_array_name='src').unstack(jnp.arange({size}, dtype=f32))")
        ints = sc.of("i")
        # the values are 0..size-1: with i >= 1 every slot is below the threshold, and the loop
        # reads past the end (eagerly an error; compiled code reads the last slot again, for ever)
        thr = f"jnp.asarray({self.choice(ints).name}, f32) + {size - 1}" if ints and self.chance(0.8) else \
            str(self.choice([1.5, 9.0]))
        start = self.choice(["0", "0", self.choice(ints).name if ints else "1"])
        carried = self.carries(sc, k_max=1)
        cnames = [self.fresh("c") for _ in carried]
        fn, cond = self.fresh("while_body"), self.fresh("while_cond")
        t, x, acc_in = self.fresh("t"), self.fresh("x"), self.fresh("cacc")
        variant = self.choice(["cond-read", "body-read", "acc"])
        self.features.add(f"readexit-{variant}")
        self.emit(f"def {cond}(carry):")
        self.emit(f"    {t}, {x}, ({', '.join(cnames + [acc_in])},) = carry")
        if variant == "cond-read":
            self.emit(f"    return {src}.read({t}) < {thr}")
        elif variant == "body-read":
            self.emit(f"    return {x} < {thr}")
        else:
            self.emit(f"    return {acc_in} < {thr} + 3.0")
        self.emit(f"def {fn}(carry):")
        self.indent += 1
        self.emit(f"{t}, {x}, ({', '.join(cnames + [acc_in])},) = carry")
        child = Scope(sc)
        self.enter(sc, carried, cnames, child, loop=True)
        child.vars.append(V(t, "i", hi=9))
        child.acc = acc_in
        x2 = self.fresh("x")
        self.emit(f"{x2} = {src}.read({t})")
        if variant == "acc":
            acc2 = self.fresh("cacc")
            self.emit(f"{acc2} = {child.acc} + {x2} + 1.0")
            child.acc = acc2
        self.block(child, self.nested(), 1, 2)
        outs = self.leave(child, len(carried))
        self.emit(f"return {t} + 1, {x2}, ({', '.join(outs + [child.acc])},)")
        self.indent -= 1
        new_names = [self.fresh("a" if v.kind == "ta" else "s") for v in carried]
        tn, xn, acc_out = self.fresh("t"), self.fresh("x"), self.fresh("acc")
        init = f"({', '.join([v.name for v in carried] + [sc.acc])},)"
        self.emit(f"{tn}, {xn}, ({', '.join(new_names + [acc_out])},) = lax.while_loop({cond}, {fn}, "
                  f"(jnp.int32({start}), jnp.float32(-1.0), {init}))")
        sc.acc = acc_out
        self.fold(sc, f"{tn}.astype(f32) + {xn}")
        self.rebind(sc, carried, new_names)

    def _branches(self, sc: Scope, n: int) -> None:
        ints = sc.of("i")
        if n == 2:
            pred, batched = self._predicate(sc)
        else:
            iv = self.choice(ints) if ints else None
            pred, batched = (iv.name, iv.batched) if iv else ("1", False)
        traced = batched and sc.vmapped
        if traced:
            self.features.add("batched-predicate")
        carried = self.carries(sc)
        swap_ok = len(carried) >= 2 and carried[0].kind == carried[1].kind == "ta" and \
            carried[0].tatype() == carried[1].tatype()
        fns = []
        for b in range(n):
            fn = self.fresh("branch")
            fns.append(fn)
            cnames = [self.fresh("c") for _ in carried]
            acc_in = self.fresh("cacc")
            self.emit(f"def {fn}({', '.join(cnames + [acc_in])}):")
            self.indent += 1
            child = Scope(sc, traced=traced)
            self.enter(sc, carried, cnames, child)
            child.acc = acc_in
            self.block(child, self.nested(), 0 if b else 1, 2)
            outs = self.leave(child, len(carried), swap=swap_ok and self.chance(0.3))
            self.emit(f"return ({', '.join(outs + [child.acc])},)")
            self.indent -= 1
        new_names = [self.fresh("a" if v.kind == "ta" else "s") for v in carried]
        acc_out = self.fresh("acc")
        args = ", ".join([v.name for v in carried] + [sc.acc])
        lhs = f"({', '.join(new_names + [acc_out])},)"
        if n == 2:
            self.emit(f"{lhs} = lax.cond({pred}, {fns[0]}, {fns[1]}, {args})")
        else:
            self.emit(f"{lhs} = lax.switch({pred}, [{', '.join(fns)}], {args})")
        sc.acc = acc_out
        self.rebind(sc, carried, new_names)

    def _predicate(self, sc: Scope) -> tuple[str, bool]:
        """A predicate, and whether vmap may batch it (in a vmapped scope)."""
        ints = sc.of("i")
        tas = [t for t in sc.tas() if not t.dyn]
        r = self.rng.random()
        if tas and r < 0.3:
            ta = self.choice(tas)
            read = f"{ta.name}.read({self.index(sc, ta.size)})"
            return f"jnp.sum({read}) > 0.5", True
        if ints and r < 0.85:
            v = self.choice(ints)
            return f"{v.name} > {self.rng.randrange(0, 3)}", v.batched
        return f"{sc.acc} > 1.0", True

    def s_cond(self, sc: Scope) -> None:
        self._branches(sc, 2)

    def s_switch(self, sc: Scope) -> None:
        self._branches(sc, 3)

    def _call_fn(self, sc: Scope, wrap: str, *, traced: bool = False, sealed: bool = False) -> None:
        """A function of (w, carried...) -> (carried..., acc), called through ``wrap``."""
        carried = self.carries(sc, k_max=1)
        fn = self.fresh("fn")
        cnames = [self.fresh("c") for _ in carried]
        wname = self.fresh("w")
        self.emit(f"def {fn}({', '.join([wname] + cnames)}):")
        self.indent += 1
        child = Scope(sc, traced=traced, sealed=sealed, vmapped=sc.vmapped, grad=sc.grad, depth=sc.depth + 1) \
            if sealed else Scope(sc, traced=traced)
        child.w = wname
        self.enter(sc, carried, cnames, child)
        child.acc = self.fresh("cacc")
        self.emit(f"{child.acc} = jnp.zeros((), f32)")
        self.block(child, self.nested(), 1, 2)
        outs = self.leave(child, len(carried))
        self.emit(f"return ({', '.join(outs + [child.acc])},)")
        self.indent -= 1
        new_names = [self.fresh("a" if v.kind == "ta" else "s") for v in carried]
        v = self.fresh("v")
        self.emit(f"({', '.join(new_names + [v])},) = {wrap.format(fn=fn)}({', '.join([sc.w] + [c.name for c in carried])})")
        self.fold(sc, v)
        self.rebind(sc, carried, new_names)

    def s_checkpoint(self, sc: Scope) -> None:
        """jax.checkpoint of a part of the program. Eagerly jax.checkpoint traces its function
        (no while_loop or cond inside then: see Scope.traced); ``remat`` (PRELUDE) is
        jax.checkpoint in compiled code and the identity eagerly, so its body may hold any
        structure (rematerialization changes no value and no error)."""
        policy = self.choice(["", "", ", policy=jax.checkpoint_policies.nothing_saveable",
                              ", prevent_cse=False"])
        if self.chance(0.5):
            self._call_fn(sc, "jax.checkpoint({fn}" + policy + ")", traced=True)
        else:
            self.features.add("remat-any-body")
            self._call_fn(sc, "remat({fn}" + policy + ")")

    def s_composite(self, sc: Scope) -> None:
        """``lax.composite`` of a part of the program: its decomposition is traced even eagerly,
        and closes over nothing traced (JAX refuses that), so its scope is sealed."""
        self._call_fn(sc, "lax.composite({fn}, name='jta.fuzz')", traced=True, sealed=True)

    def s_jit_static(self, sc: Scope) -> None:
        """A nested jax.jit with a static size argument, called with one or two sizes; it may
        take an array of the caller and give it back (arrays through the jit boundary)."""
        fn, wname, n, iname = self.fresh("jitted"), self.fresh("w"), self.fresh("n"), self.fresh("i")
        by_name = self.chance(0.5)
        passed = [t for t in sc.tas() if not t.accum]
        carried = [self.choice(passed)] if passed and self.chance(0.5) else []
        cname = self.fresh("c")
        how = f"static_argnames=({n!r},)" if by_name else f"static_argnums=({2 + len(carried)},)"
        self.emit(f"@functools.partial(jax.jit, {how})")
        self.emit(f"def {fn}({wname}, {iname}, {cname + ', ' if carried else ''}{n}):")
        self.indent += 1
        child = Scope(sc)
        child.w = wname
        child.vars.append(V(iname, "i", batched=sc.vmapped))
        self.enter(sc, carried, [cname] * len(carried), child)
        child.acc = self.fresh("cacc")
        self.emit(f"{child.acc} = jnp.zeros((), f32)")
        self.sym_lo[n] = 2
        ta = V(self.fresh("a"), "ta", shape=self.choice([(), (2,)]), size=n, tname="", fresh=True)
        self.emit(f"{ta.name} = jta.TensorArray(f32, size={n}, element_shape={_render(ta.shape)})")
        child.vars.append(ta)
        self.block(child, self.nested(), 1, 2)
        outs = self.leave(child, len(carried))
        self.emit(f"return ({', '.join(outs + [child.acc])},)")
        self.indent -= 1
        ints = sc.of("i")
        idx = self.choice(ints).name if ints else "0"
        for size in self.rng.sample([2, 3, 4], self.rng.randrange(1, 3)):
            v = self.fresh("v")
            arg = f"{n}={size}" if by_name else str(size)
            if carried:
                new = self.fresh("a")
                self.emit(f"{new}, {v} = {fn}({sc.w}, {idx}, {carried[0].name}, {arg})")
                self.rebind(sc, carried, [new])
                carried = [v_ for v_ in sc.vars if v_.name == new]
            else:
                self.emit(f"({v},) = {fn}({sc.w}, {idx}, {arg})")
            self.fold(sc, v)

    def s_vmap_in(self, sc: Scope) -> None:
        """jax.vmap of a part of the program over an index vector."""
        fn, iname, wname = self.fresh("member"), self.fresh("i"), self.fresh("w")
        self.emit(f"def {fn}({iname}, {wname}):")
        self.indent += 1
        child = Scope(sc, vmapped=True)
        child.w = wname
        child.vars.append(V(iname, "i", batched=True))
        child.acc = self.fresh("cacc")
        self.emit(f"{child.acc} = jnp.zeros((), f32)")
        self.block(child, self.nested(), 1, 2)
        self.emit(f"return {child.acc}")
        self.indent -= 1
        ints = sc.of("i")
        r = self.rng.random()
        if r < 0.4 and not sc.vmapped and self._top_iv(sc):
            batch = "iv"
        elif ints and r < 0.8:
            batch = f"jnp.stack([{', '.join(self.index(sc, 4) for _ in range(self.choice([2, 3])))}])"
        else:
            batch = f"jnp.arange({self.choice([2, 3])}, dtype=jnp.int32)"
        v = self.fresh("v")
        self.emit(f"{v} = jax.vmap({fn}, in_axes=(0, None))({batch}, {sc.w})")
        self.fold(sc, v)

    def s_grad_in(self, sc: Scope) -> None:
        """jax.grad (or value_and_grad) of a part of the program, with respect to w."""
        fn, wname = self.fresh("loss"), self.fresh("w")
        self.emit(f"def {fn}({wname}):")
        self.indent += 1
        child = Scope(sc, grad=True)
        child.w = wname
        child.acc = self.fresh("cacc")
        self.emit(f"{child.acc} = jnp.zeros((), f32)")
        self.block(child, self.nested(), 1, 2)
        self.emit(f"return {child.acc}")
        self.indent -= 1
        v = self.fresh("v")
        how = self.choice(["grad", "grad", "value_and_grad", "jvp", "vjp"])
        self.features.add(f"grad-in-{how}")
        if how == "grad":
            self.emit(f"{v} = jax.grad({fn})({sc.w})")
        elif how == "value_and_grad":
            self.emit(f"{v} = jnp.stack(jax.value_and_grad({fn})({sc.w}))")
        elif how == "jvp":
            self.emit(f"{v} = jnp.stack(jax.jvp({fn}, ({sc.w},), (jnp.float32(1.0),)))")
        else:
            out, pull = self.fresh("out"), self.fresh("pull")
            self.emit(f"{out}, {pull} = jax.vjp({fn}, {sc.w})")
            self.emit(f"{v} = jnp.stack([{out}, {pull}(jnp.float32(1.5))[0]])")
        self.fold(sc, v)

    def s_checkify_in(self, sc: Scope) -> None:
        """jta.checkify of a part of the program, its error raised again inside with jta.throw."""
        fn, wname = self.fresh("part"), self.fresh("w")
        self.emit(f"def {fn}({wname}):")
        self.indent += 1
        child = Scope(sc)
        child.w = wname
        child.acc = self.fresh("cacc")
        self.emit(f"{child.acc} = jnp.zeros((), f32)")
        self.block(child, self.nested(), 1, 2)
        self.emit(f"return {child.acc}")
        self.indent -= 1
        err, v = self.fresh("errors"), self.fresh("v")
        # (the error is always raised again: eagerly a closed-over concrete index is static, so
        # the op raises while jta.checkify traces, where compiled code returns it as data)
        if self.chance(0.3) and not sc.vmapped:  # vmap of checkify: a batched record
            self.features.add("vmap-of-checkify")
            self.emit(f"{err}, {v} = jax.vmap(lambda i, w: jta.checkify({fn})(w + 0.0 * i), in_axes=(0, None))"
                      f"(jnp.arange(2), {sc.w})")
        else:
            self.emit(f"{err}, {v} = jta.checkify({fn})({sc.w})")
        self.emit(f"jta.throw({err})")
        self.fold(sc, v)

    def s_custom_vjp(self, sc: Scope) -> None:
        """A jax.custom_vjp of (w, i, d) whose primal, forward and backward all use arrays
        (made inside: these functions are sealed, they close over nothing traced)."""
        base = self.fresh("cv")
        wname, iname, dname = self.fresh("w"), self.fresh("i"), self.fresh("d")
        sig = f"{wname}, {iname}, {dname}"

        def body(acc0: str, extra=()) -> Scope:
            child = Scope(sc, sealed=True, vmapped=sc.vmapped, grad=sc.grad, depth=sc.depth + 1)
            child.w, child.xs, child.xs_rows = wname, dname, sc.xs_rows
            child.vars.append(V(iname, "i", batched=sc.vmapped))
            for e in extra:
                child.vars.append(e)
            child.acc = acc0
            self.block(child, tuple(s for s in self.nested() if s in ("scan", "cond", "checkpoint")), 1, 2)
            return child

        self.emit(f"def {base}_primal({sig}):")
        self.indent += 1
        self.emit("cacc0 = jnp.zeros((), f32)")
        child = body("cacc0")
        self.emit(f"return {child.acc}")
        self.indent -= 1
        self.emit(f"{base} = jax.custom_vjp({base}_primal)")
        self.emit(f"def {base}_fwd({sig}):")
        self.indent += 1
        if self.chance(0.5):
            self.emit(f"return {base}_primal({sig}), ({sig})")
        else:  # a forward that does more than the primal
            self.emit(f"out = {base}_primal({sig})")
            self.emit("cacc0 = jnp.zeros((), f32)")
            child = body("cacc0")
            self.emit(f"return out + 0.0 * {child.acc}, ({sig})")
        self.indent -= 1
        g = self.fresh("g")
        self.emit(f"def {base}_bwd(res, {g}):")
        self.indent += 1
        self.emit(f"{sig} = res")
        # (a rule linear in the cotangent: its arrays see the primal values only)
        self.emit("cacc0 = jnp.zeros((), f32)")
        child = body("cacc0")
        self.emit(f"return ({g} * (1.0 + 0.125 * {child.acc}), None, None)")
        self.indent -= 1
        self.emit(f"{base}.defvjp({base}_fwd, {base}_bwd)")
        ints = sc.of("i")
        idx = self.choice(ints).name if ints else "0"
        data = sc.xs if sc.xs else f"jnp.ones(({N_DEFAULT}, 2), f32)"
        self._call_custom(sc, base, idx, data)

    def s_custom_jvp(self, sc: Scope) -> None:
        """A jax.custom_jvp of (w, i, d) whose primal and JVP rule both use arrays (sealed)."""
        base = self.fresh("cj")
        wname, iname, dname = self.fresh("w"), self.fresh("i"), self.fresh("d")
        sig = f"{wname}, {iname}, {dname}"

        def body(acc0: str, extra=()) -> Scope:
            child = Scope(sc, sealed=True, vmapped=sc.vmapped, grad=sc.grad, depth=sc.depth + 1)
            child.w, child.xs, child.xs_rows = wname, dname, sc.xs_rows
            child.vars.append(V(iname, "i", batched=sc.vmapped))
            child.vars.extend(extra)
            child.acc = acc0
            self.block(child, tuple(s for s in self.nested() if s in ("scan", "cond")), 1, 2)
            return child

        # (the index is an ordinary argument: a traced nondiff_argnums argument under jax.grad in
        # a scan makes JAX itself raise UnexpectedTracerError, TensorArrays or not)
        self.emit("@jax.custom_jvp")
        self.emit(f"def {base}({sig}):")
        self.indent += 1
        self.emit("cacc0 = jnp.zeros((), f32)")
        child = body("cacc0")
        self.emit(f"return {child.acc}")
        self.indent -= 1
        tw, td = self.fresh("tw"), self.fresh("td")
        self.emit(f"@{base}.defjvp")
        self.emit(f"def {base}_jvp(primals, tangents):")
        self.indent += 1
        self.emit(f"{wname}, {iname}, {dname} = primals")
        self.emit(f"{tw}, _, {td} = tangents")
        self.emit(f"out = {base}({sig})")
        # (a JVP linear in the tangents, as JAX's transposition needs: a cond on a tangent would
        # trip JAX's own assertion in _cond_transpose_fancy)
        self.emit("cacc0 = jnp.zeros((), f32)")
        child = body("cacc0")
        self.emit(f"return out, {tw} * (1.0 + 0.125 * {child.acc}) + jnp.sum({td})")
        self.indent -= 1
        ints = sc.of("i")
        idx = self.choice(ints).name if ints else "0"
        data = sc.xs if sc.xs else f"jnp.ones(({N_DEFAULT}, 2), f32)"
        self._call_custom(sc, base, idx, data)

    def _call_custom(self, sc: Scope, base: str, idx: str, data: str) -> None:
        """Call a custom-derivative function; sometimes differentiate it right there too, so
        that its rules run outside a program-wide jax.grad."""
        v = self.fresh("v")
        if sc.grad or self.chance(0.5):
            self.emit(f"{v} = {base}({sc.w}, {idx}, {data})")
        else:
            self.emit(f"{v} = jnp.stack(jax.value_and_grad({base})({sc.w}, {idx}, {data}))")
            self.features.add("grad-of-custom")
        self.fold(sc, v)

    def s_shard_map(self, sc: Scope) -> None:
        """jax.shard_map over 2 simulated devices: xs split by rows, an index replicated."""
        fn, dname, iname, wname = self.fresh("shard"), self.fresh("d"), self.fresh("i"), self.fresh("w")
        grad = self.chance(0.3) and not sc.vmapped  # differentiated: no while_loop inside
        self.emit(f"def {fn}({dname}, {iname}, {wname}):")
        self.indent += 1
        child = Scope(sc, sealed=True, depth=sc.depth + 1, grad=sc.grad or grad)
        child.w, child.xs, child.xs_rows = wname, dname, N_DEFAULT // 2
        child.vars.append(V(iname, "i"))
        child.acc = self.fresh("cacc")
        self.emit(f"{child.acc} = jnp.zeros((), f32)")
        saved = self.n_min
        self.n_min = N_DEFAULT // 2
        self.block(child, ("scan", "cond", "while"), 1, 2)
        self.n_min = saved
        self.emit(f"return {child.acc}[None]")
        self.indent -= 1
        ints = sc.of("i")
        idx = self.choice(ints).name if ints else "0"
        v = self.fresh("v")
        if grad:
            self.features.add("grad-of-shard-map")
            self.emit(f"{v} = jax.grad(lambda w_: jnp.sum(shard_map({fn}, 2, {sc.xs}, {idx}, w_)))({sc.w})")
        else:
            self.emit(f"{v} = shard_map({fn}, 2, {sc.xs}, {idx}, {sc.w})")
        self.fold(sc, v)

    # -- the program -----------------------------------------------------------------------------
    def program(self) -> Program:
        fam = self.family
        top = Scope(depth=0)
        top.xs, top.xs_rows = "xs", ("N" if fam == "shapes" else N_DEFAULT)
        wrap = "plain"
        if fam == "vmap-out":
            wrap = "vmap"
        elif fam == "grad":
            wrap = "grad"
        elif fam == "jta-while":
            wrap = self.choice(["grad", "grad", "vmap-grad", "plain"])
        elif fam == "mixed":
            wrap = self.choice(["plain", "plain", "vmap", "grad", "vmap-grad"])
        batched_ints = set()
        if wrap in ("vmap", "vmap-grad"):
            batched_ints = set(self.rng.sample(["i0", "i1", "i2"], self.rng.randrange(1, 4)))
            top.vmapped = True
        top.grad = wrap in ("grad", "vmap-grad")
        for name in ("i0", "i1", "i2"):  # how each unbatched index argument is passed (calls())
            r = self.rng.random()
            self.kinds[name] = "default" if name in batched_ints or r < 0.68 else "python" if r < 0.8 else \
                "bool" if r < 0.84 else self.choice(["int8", "int16", "uint8", "uint16", "uint32"])
            if self.kinds[name] != "default":
                self.features.add(f"index-{self.kinds[name]}")
        for name in ("i0", "i1", "i2"):
            top.vars.append(V(name, "i", batched=name in batched_ints))
        self.x64 = fam != "shard-map" and self.chance(0.2 if fam == "mixed" else 0.06)
        if self.x64:
            self.features.add("x64")
        jit_top = self.chance(0.25) or fam == "jit-static"
        self.static_n = wrap == "plain" and (fam == "jit-static" or (jit_top and self.chance(0.3)))
        params = ["w", "xs", "i0", "i1", "i2", "iv"] + (["n"] if self.static_n else [])
        body_name = "body" if wrap != "plain" else "program"
        self.outs: list[str] = []
        self.lines = []
        self.indent = 1
        top.acc = "acc0"
        self.emit("acc0 = jnp.zeros((), f32)")
        if fam == "shapes":
            self.emit("N = xs.shape[0]")
            self.features.add("shapes")
        if self.static_n:
            ta = V(self.fresh("a"), "ta", shape=self.choice([(), (2,)]), size="n", tname="")
            self.emit(f"{ta.name} = jta.TensorArray(f32, size=n, element_shape={_render(ta.shape)})")
            top.vars.append(ta)
        own = {"straight": None, "raw": "raw-ops", "accum": "accumulators", "mixed": None, "vmap-out": None,
               "grad": None, "shapes": None}.get(fam, fam)
        if fam == "shapes" and self.chance(0.5):
            self.new_ta(top, size="N", shape=(2,), fill=True)
        if fam == "mixed":
            own = self.choice(STRUCTURES + ("while-readexit", "raw-ops", "accumulators"))
        elif fam == "custom-vjp" and self.chance(0.35):
            own = "custom-jvp"
        nested = self.nested()
        self.block(top, nested, 1, 2 if own is not None else 3)
        if own is not None:
            self.structure(top, own)
            if self.chance(0.1):
                self.structure(top, own)
        if self.chance(0.3):
            self.block(top, nested, 1, 1)
        if fam == "shapes" and self.chance(0.7):  # an output whose structure depends on the shape
            tas = [t for t in top.tas() if t.size == "N" and not t.dyn]
            if tas:
                ta = self.choice(tas)
                tail = self.fresh("rows")
                self.emit(f"{tail} = tuple({ta.name}.read(k) for k in range(N))")
                self.outs.append(tail)
                self.features.add("shape-dependent-outputs")
        tas = [t for t in top.tas() if not t.dyn]
        if tas and self.chance(0.3):  # a returned array's stack, so that its values are compared
            self.outs.append(f"{self.choice(tas).name}.stack()")
        returned = top.tas() + [r for r in top.of("raw") if r.handles]
        if returned and self.chance(0.05):  # an array (or raw-op state) itself
            self.outs.append(self.choice(returned).name)
            self.features.add("returns-array")
        body_lines = self.lines
        out_expr = ", ".join([top.acc] + self.outs)
        header = []
        if wrap == "plain":
            if self.static_n:
                header.append(f"@functools.partial(jax.jit, static_argnums=({params.index('n')},))"
                              if self.chance(0.5) else "@functools.partial(jax.jit, static_argnames=('n',))")
            elif jit_top:
                header.append("@jax.jit")
        header.append(f"def {body_name}({', '.join(params)}):")
        src = header + body_lines
        if wrap in ("grad", "vmap-grad"):
            src.append(f"    return {top.acc}, ({', '.join(self.outs)}{',' if len(self.outs) == 1 else ''})")
        else:
            src.append(f"    return ({out_expr},)")
        static = (params.index("n"),) if self.static_n else ()
        if wrap == "vmap":
            axes = ", ".join("0" if p in batched_ints else "None" for p in params)
            src.append(f"program = jax.vmap(body, in_axes=({axes},))")
        elif wrap == "grad":
            src.append("program = jax.value_and_grad(body, has_aux=True)")
        elif wrap == "vmap-grad":
            axes = ", ".join("0" if p in batched_ints else "None" for p in params)
            src.append(f"program = jax.vmap(jax.value_and_grad(body, has_aux=True), in_axes=({axes},))")
        if wrap != "plain":
            self.features.add(f"outer-{wrap}")
        if jit_top and wrap != "plain" and not self.static_n:
            src.append("program = jax.jit(program)")
        if "jax.jit" in "\n".join(src):  # a jax.jit of the program's own traces a bool as a bool, eagerly not
            self.kinds = {k: "python" if v == "bool" else v for k, v in self.kinds.items()}
        self.checked_only = self.checked_only or "bool" in self.kinds.values()
        calls = self.calls(batched_ints, static)
        return Program(family=fam, seed=self.seed, source="\n".join(src) + "\n", calls=calls,
                       static_argnums=static, may_hang=self.may_hang, checked_only=self.checked_only,
                       devices=DEVICES if "shard-map" in self.features else 1,
                       features=tuple(sorted(self.features)), x64=self.x64)

    def calls(self, batched: set, static: tuple) -> list:
        """Two or three argument tuples: index values mostly in range, sometimes out of range.
        An unbatched index keeps one kind in every call (``self.kinds``): a NumPy int32 (int64
        under x64, sometimes past int32), a Python int or bool, or a NumPy scalar of another
        width, signed or unsigned (where -1 wraps to the largest value)."""
        rng = self.rng
        shapes = [self.n_min, N_DEFAULT, self.n_min] if self.family == "shapes" else [N_DEFAULT] * 2
        itype = np.int64 if self.x64 else np.int32
        out = []
        for k, rows in enumerate(shapes):
            def idx(first: bool = k == 0) -> int:
                if first and rng.random() < 0.9:  # the first call: mostly indices that fit
                    return rng.randrange(0, 2)
                r = rng.random()
                if r < 0.45:
                    return rng.randrange(0, 2)
                if r < 0.7:
                    return rng.randrange(2, 4)
                return rng.choice([-1, 4, 5, 7, 2**33 + 1] if self.x64 else [-1, 4, 5, 7])
            w = np.float32(rng.choice([0.5, 1.0, -0.5, 2.0]))
            xs = (np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) / 4 - 0.5).astype(np.float32)
            ints = []
            for name in ("i0", "i1", "i2"):
                kind = self.kinds.get(name, "default")
                if name in batched:
                    ints.append(np.array([idx() for _ in range(B)], itype))
                elif kind == "python":
                    ints.append(int(idx()))
                elif kind == "bool":
                    ints.append(bool(idx() % 2))
                elif kind != "default":  # a NumPy scalar of another width (-1 wraps in an unsigned one)
                    value = idx()
                    ints.append(np.array(value if abs(value) < 2**7 else 7).astype(getattr(np, kind))[()])
                else:
                    ints.append(itype(idx()))
            iv = np.array([idx() for _ in range(3)], itype)
            args = [w, xs, *ints, iv]
            if static:
                args.append(rng.choice([2, 3]) if k == 0 else rng.choice([2, 3, 4]))
            out.append(tuple(args))
        return out


def generate(family: str, seed: int) -> Program:
    """The program of ``family`` for ``seed`` (deterministic); ``regression:NAME`` is the
    program ``REGRESSIONS[NAME]``."""
    if family.startswith("regression:"):
        name = family.split(":", 1)[1]
        return REGRESSIONS[name] if name in REGRESSIONS else DIFFERENCES[name][0]
    return Generator(family, seed).program()


# -- the mismatch classes the fuzzer found, one minimal program each ---------------------------
# (tests/test_structural_fuzz.py::test_mismatch_class runs each in all modes: ``-k NAME``)

def _regression(name: str, note: str, source: str, calls: list, **kw: Any) -> Program:
    return Program(family=f"regression:{name}", seed=0, source=source, calls=calls, note=note, **kw)


_W, _XS = np.float32(1.0), (np.arange(8, dtype=np.float32).reshape(4, 2) / 4 - 0.5)

_SPLIT = """\
split() changes the array's static metadata (ArrayMeta.marked_size: TensorFlow's size for a
later gradient's concat): an array split in one branch of a lax.cond, or carried through a loop where it swaps
places with an unsplit one, no longer has the other's pytree structure, and every compiled mode
fails while tracing ("cond branch outputs must have the same pytree structure", "while_loop
body function carry input and carry output must have the same pytree structure"; the two
ArrayMeta it prints differ in "split to size N"). Eagerly only the taken branch runs: no error.
Fuzzer: cond seed 0, while seed 1002 (swapped carries), scan-swap. The ArrayMeta repr shows
"split to size N" with its hint (split before the cond or loop), so JAX's message says what
differs and what to do; README "Differences from TensorFlow". The generator does not split an
array that a cond or loop carries."""

_EXPORT_TREE = """\
jax.export cannot serialize the output of a checkified program that returns a jta.TensorArray
or a jta.raw_ops State: "Cannot serialize PyTreeDef containing an unregistered type" (jta
registers ErrorRecord's serialization, jta/_serialization.py, but not TensorArray's nor State's).
Eager, checked and jit(checkify) return the array. Fuzzer: every family, feature returns-array.
Found at 3b5a682; fixed by 8c7b761 (passes since)."""

_EXPORT_GRADS = """\
jax.export cannot serialize the output of a checkified program that returns a jta.raw_ops State
holding a gradient array (TensorArrayGradV3): State's serialization (8c7b761) flattens its
``grads`` dict, keyed by (name, source) tuples, and jax.export serializes dicts with string keys
only: "TypeError: Serialization is supported only for dictionaries with string keys. Found key
('TensorArrayV3_0', 'gradients') of type <class 'tuple'>". Eager, checked and jit(checkify)
return the state. Fuzzer (at 0210d3b): family raw seed 10089 (export mode, both calls)."""

_VMAP_COND = """\
Under jax.vmap, a lax.cond whose predicate is batched runs both branches (JAX traces them to
jaxprs, even eagerly); the v2 channel masks the checks of the branch no member takes. Eagerly
(jax.disable_jit()) an index that is concrete there (a closed-over argument, a Python int, a
dynamic array's concrete size) makes jta check the op while JAX traces the branch, so it raises
at once, for the branch no member takes: eager reports "Tried to read from index 5 but array
size is: 3" where every compiled mode (traced index, check recorded and masked) returns the
values. The eager side is the odd one (an error no member made). Fuzzer (at 0210d3b):
vmap-out seed 20001 (a static read of an empty dynamic array in the untaken branch)."""

_HANG = """\
A while_loop whose exit depends on a value read from an array, past its end: eagerly the read
raises at once; compiled code reads a clamped slot, the exit condition never holds, and the loop
runs for ever (checked, jit(checkify), export: timeouts). Found at 1bf97a5 (the pre-v2 channel);
fixed by v2 (6ff2e10: a functionalized while_loop stops at the first error)."""

_SHARD_READ = """\
A value op (a read past the end) inside jax.shard_map: jta.checkify did not functionalize
shard_map, so the check ran as a host callback: checked and jit(checkify) raised JaxRuntimeError
(not jta's InvalidArgumentError), and export failed ("serialization of host_callbacks is not yet
implemented"), even without an error. Found at 1bf97a5; fixed by v2 (6ff2e10, shard_map rule)."""

_SHARD_WRITE = """\
A mutator's error (a write past the end) in an array dropped inside jax.shard_map: the deferred
check lowered to nothing, so every compiled mode lost the error. Found at 1bf97a5; fixed by v2."""

_SHAPES = """\
An output whose pytree structure depends on the input shape (a tuple of len(xs) reads): with
shapes alternating across calls (3, 4, 3 rows), jta.checked rebuilt its outputs with the structure
of its latest trace, so the third call raised StopIteration (or returned the wrong structure).
Found at 1bf97a5; fixed by v2 (6ff2e10: checked is jax.jit)."""

REGRESSIONS: dict[str, Program] = {p.family.split(":", 1)[1]: p for p in [
    _regression("export-returns-tensorarray", _EXPORT_TREE, """\
def program(i):
    return jta.TensorArray(f32, size=3, element_shape=()).write(i, 1.0)
""", [(np.int32(1),), (np.int32(5),)]),
    _regression("export-returns-raw-state", _EXPORT_TREE, """\
def program(i):
    s, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, element_shape=())
    s, _ = ops.TensorArrayWriteV3(s, h, i, 1.0, flow)
    return s
""", [(np.int32(1),), (np.int32(5),)]),
    _regression("export-returns-raw-state-with-gradient", _EXPORT_GRADS, """\
def program(i):
    s, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, element_shape=())
    s, g, gflow = ops.TensorArrayGradV3(s, h, flow, "gradients")
    s, _ = ops.TensorArrayWriteV3(s, g, i, 1.0, gflow)
    return s
""", [(np.int32(1),), (np.int32(5),)]),
    _regression("while-exit-reads-past-end", _HANG, """\
def program(i):
    src = jta.TensorArray(f32, size=3, element_shape=()).unstack(jnp.arange(3, dtype=f32))
    return lax.while_loop(lambda t: src.read(t) < 9.0, lambda t: t + 1, i)
""", [(np.int32(0),), (np.int32(5),)], may_hang=True),
    _regression("shard-map-read-past-end", _SHARD_READ, """\
def program(xs, i):
    def body(x, i):
        ta = jta.TensorArray(f32, size=2, element_shape=(2,)).unstack(x)
        return ta.read(i)[None]
    return shard_map(body, 2, xs, i)
""", [(_XS, np.int32(1)), (_XS, np.int32(5))], devices=DEVICES),
    _regression("shard-map-dropped-write", _SHARD_WRITE, """\
def program(xs, i):
    def body(x, i):
        jta.TensorArray(f32, size=2, element_shape=(2,)).write(i, x[0])  # dropped
        return x[:1]
    return shard_map(body, 2, xs, i)
""", [(_XS, np.int32(1)), (_XS, np.int32(5))], devices=DEVICES),
    _regression("checked-shape-dependent-outputs", _SHAPES, """\
def program(xs):
    ta = jta.TensorArray(f32, size=xs.shape[0], element_shape=(2,)).unstack(xs)
    return tuple(ta.read(k) for k in range(xs.shape[0]))
""", [(_XS[:3],), (_XS,), (_XS[:3],)]),
]}

# Where eager and compiled code differ by design: each program with what every mode gives, per
# call: ``None`` (values, the same in the modes that give them) or ``(class, text in str)``.
# tests/test_structural_fuzz.py::test_documented_difference checks exactly that; the generator
# does not write these programs.
_CHECKPOINT_STATIC = """\
jax.checkpoint traces its function even eagerly (under jax.disable_jit()): there a closed-over
integer is concrete, so jta checks an index made from it while tracing. An out-of-range read at
such a static index raises at once, before the error of a gather that came first but whose check
was recorded (its indices are a jnp array, which jta takes as traced). Compiled, both indices are
traced and recorded: the gather's error comes first, as TensorFlow's would. README/docs: static
problems raise while tracing. Fuzzer (at c1f9377, --long): checkpoint seeds 1094, 1114, 1132,
1216, grad 1279, vmap-out 1065 (a loop counter, concrete in the branches of a batched cond)."""

_STRUCTURE_CHANGED = ("TypeError", "split to size 2")
_READ_5_OF_3 = ("InvalidArgumentError", "Tried to read from index 5 but array size is: 3")
DIFFERENCES: dict[str, tuple[Program, dict[str, list]]] = {p.family.split(":", 1)[1]: (p, expected) for p, expected in [
    (_regression("split-in-cond-branch", _SPLIT, """\
def program(w, p):
    ta = jta.TensorArray(f32, size=2, element_shape=(2,))
    ta = lax.cond(p > 0, lambda t: t.split(jnp.full((4,), 2.0, f32) * w, [2, 2]), lambda t: t, ta)
    return ta.stack()
""", [(_W, np.int32(1)), (_W, np.int32(0))]), {"eager": [None, None], "compiled": [_STRUCTURE_CHANGED] * 2}),
    (_regression("split-swapped-in-while", _SPLIT, """\
def program(w, n):
    a = jta.TensorArray(f32, size=2, element_shape=(2,)).split(jnp.full((4,), 0.5, f32) * w, [2, 2])
    b = jta.TensorArray(f32, size=2, element_shape=(2,))

    def body(c):
        t, a, b = c
        return t + 1, b.write(t, a.read(t)), a

    return lax.while_loop(lambda c: c[0] < n, body, (0, a, b))[1].stack()
""", [(_W, np.int32(1)), (_W, np.int32(3))]), {"eager": [None, ("InvalidArgumentError", "already been written to")], "compiled": [_STRUCTURE_CHANGED] * 2}),
    (_regression("checkpoint-body-static-index", _CHECKPOINT_STATIC, """\
def program(w, xs, i1, i2):
    a = jta.TensorArray(f32, size=2, element_shape=()).unstack(xs[3] * w)

    def fn(w, c):
        return jnp.sum(c.gather(jnp.arange(1, dtype=jnp.int32) + i2)) + c.read(i1 + 1)

    return jax.checkpoint(fn)(w, a)
""", [(_W, _XS, np.int32(1), np.int32(7)), (_W, _XS, np.int32(0), np.int32(0))]),
     {"eager": [("InvalidArgumentError", "Tried to read from index 2 but array size is: 2"), None],
      "compiled": [("InvalidArgumentError", "Tried to read from index 7 but array size is: 2"), None]}),
    (_regression("vmap-cond-untaken-branch-static-index", _VMAP_COND, """\
def program(p, i):
    a = jta.TensorArray(f32, size=3, element_shape=()).unstack(jnp.arange(3, dtype=f32))
    return jax.vmap(lambda p: lax.cond(p > 0, lambda: a.read(i), lambda: -1.0))(p)
""", [(np.array([0, 0], np.int32), np.int32(5)), (np.array([0, 1], np.int32), np.int32(5)),
      (np.array([0, 0], np.int32), np.int32(1))]), {"eager": [_READ_5_OF_3, _READ_5_OF_3, None], "compiled": [None, _READ_5_OF_3, None]}),
]}
