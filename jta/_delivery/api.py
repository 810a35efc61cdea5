"""``jta.throw``, ``jta.checkify`` and ``jta.checked``: turn recorded errors into exceptions."""

from __future__ import annotations

import enum
import functools
import sys
from collections.abc import Callable
from typing import Any, Optional, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config as jax_config
from jax._src.array import ArrayImpl

from .._core import capacities
from .._core.array import ArrayData
from .._records import primitives
from .._records.catalogue import Error, code_of
from .._records.primitives import Site
from .._records.records import is_concrete
from ..errors import UnimplementedError
from . import callbacks, jax_rules, known  # noqa: F401  (check_p's lowering; jta's changes to JAX's rules)
from .callbacks import take_raised
from .functionalize import Static, functionalize, is_traceable, static_arguments
from .value_ops import throw_array

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
_NOTHING: Any = object()


def throw(tree: T = _NOTHING) -> T:
    """Raise the first error recorded in any TensorArray inside ``tree``; else return ``tree``.

    ``tree`` may be a TensorArray, a ``jta.raw_ops`` state, a :class:`jta.ErrorRecord`, or any
    pytree holding them.
    Eagerly (or on the outputs of a jitted function) this raises TensorFlow's exception
    class with TensorFlow's text; inside ``jit`` it raises at run time from compiled code.
    With no argument, it raises the error that a check in compiled code raised since the last
    call (JAX reports those as ``JaxRuntimeError``; this gives jta's class and text back).

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> @jax.jit
    ... def fill(ta, i):
    ...     return ta.write(i, 1.0)
    >>> ta = fill(jta.TensorArray(jnp.float32, size=2, element_shape=()), 5)
    >>> jta.throw(ta)
    Traceback (most recent call last):
    jta.errors.InvalidArgumentError: TensorArray TensorArray: Tried to write to index 5 but array is not resizeable and size is: 2
    TensorArray 'TensorArray', at <doctest ...>:1 (<module>)

    ```
    """
    if tree is _NOTHING:
        handling = sys.exc_info()[1]  # the JaxRuntimeError being handled, if any
        exc = take_raised(handling if isinstance(handling, jax.errors.JaxRuntimeError) else None)
        if exc is not None:
            raise exc
        return cast(T, None)
    leaves = jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, (ArrayData, ErrorRecord)))
    for leaf in leaves:
        if isinstance(leaf, ErrorRecord):
            leaf.throw()
        elif isinstance(leaf, ArrayData):
            throw_array(leaf)
    return tree


@jax.tree_util.register_pytree_node_class
class ErrorRecord:
    """The first TensorArray error of a program, as data: what :func:`checkify` returns.

    A pytree of one integer array ``[code, v1, v2, v3, site]`` (all zeros: no error; batched
    under ``vmap``) whose static data is the table of sites (array names, template fields,
    source lines) that ``site`` indexes, so it can be returned from ``jit`` and from a
    ``jax.export``-ed function, and decoded in any process. ``throw()`` raises it (TensorFlow's
    class and text), ``exception`` describes it.
    """

    def __init__(self, record: Any, sites: tuple[Site, ...] = ()):
        self.record = record
        self.sites = sites

    def tree_flatten(self) -> tuple[tuple[Any], tuple[Site, ...]]:
        return (self.record,), self.sites

    @classmethod
    def tree_unflatten(cls, sites: tuple[Site, ...], children: Any) -> ErrorRecord:
        return cls(children[0], sites)

    @property
    def exception(self) -> Optional[Exception]:
        """The recorded error as an exception object (concrete records only), else ``None``."""
        return primitives.exception(self.record, self.sites) if is_concrete(self.record) else None

    def throw(self) -> None:
        """Raise the recorded error: now when concrete, else as a value op's check does (the
        first failing member of a batched record)."""
        if is_concrete(self.record):
            exc = primitives.exception(self.record, self.sites)
            if exc is not None:
                raise exc
        else:
            record = jax.numpy.asarray(self.record)
            primitives.bind(record[..., :4], record[..., 4], self.sites, deferred=False)

    def __repr__(self) -> str:
        if not is_concrete(self.record):
            return f"ErrorRecord(traced {getattr(self.record, 'shape', '')})"
        exc = self.exception
        return "ErrorRecord(no error)" if exc is None else f"ErrorRecord({type(exc).__name__}: {exc})"


def checkify(f: Callable[..., Any], *, static_argnums: Any = None, static_argnames: Any = None
             ) -> Callable[..., tuple[ErrorRecord, Any]]:
    """``f`` returning ``(errors, out)``, with every TensorArray check in it done as data.

    Every check of every op ``f`` runs (arrays returned or not, raw-op states dropped, reads
    inside loops, under ``vmap`` and ``grad``, inside ``jax.checkpoint``, custom derivatives,
    nested ``jit`` and ``shard_map``), and the records of the arrays ``f`` returns, are folded
    into one :class:`ErrorRecord` that holds the first error in program order: no branch and no
    host callback, so the result can be jitted, exported with ``jax.export``, and raised later
    with ``jta.throw(errors)``. A ``while_loop`` stops at the first error; when ``errors`` holds
    one, the other outputs are unspecified. ``f`` is traced even under ``jax.disable_jit()`` (as
    JAX's own ``checkify`` is), so there too its errors come back as data.

    **Arguments:**

    - ``f``: the function. Array and Python-number arguments are traced; other leaves
      (strings, callables) are closed over.
    - ``static_argnums``, ``static_argnames``: arguments passed to ``f`` as they are, as in
      ``jax.jit`` (give the same ones to the ``jax.jit`` around it); by default those of
      ``f``'s own ``jax.jit``, if it is one.

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> def last(xs, i):
    ...     return jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(xs).read(i)
    >>> errors, value = jax.jit(jta.checkify(last))(jnp.arange(3.0), 7)
    >>> errors
    ErrorRecord(InvalidArgumentError: Tried to read from index 7 but array size is: 3)

    ```
    """
    run = functionalize(_reporting_outputs(f), static_argnums, static_argnames)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> tuple[ErrorRecord, Any]:
        record, sites, out = run(*args, **kwargs)
        return ErrorRecord(record, sites), out

    return wrapper


def _reporting_outputs(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f``, also reporting the records of the arrays it returns (an argument it hands back
    may hold an error made before it was called)."""
    @functools.wraps(f)
    def reporting(*args: Any, **kwargs: Any) -> Any:
        out = f(*args, **kwargs)
        for leaf in jax.tree_util.tree_leaves(out, is_leaf=lambda x: isinstance(x, ArrayData)):
            if isinstance(leaf, ArrayData):
                throw_array(leaf)
            elif not (is_traceable(leaf) or isinstance(leaf, _INERT)):  # it may hold a tracer, as jax.jit says
                Error.OUTPUT_NOT_JAX_TYPE.raise_(function=_describe(f), type=type(leaf))
        return out

    return reporting


# Output leaves that are neither arrays nor numbers but cannot hold a tracer: returned as they are
# (a raw-op handle is a string); any other (an object of a plain class) is refused as jax.jit does.
_INERT = (str, bytes, np.dtype, type, enum.Enum)


def _describe(f: Callable[..., Any]) -> str:
    code = getattr(f, "__code__", None)
    where = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    return f"{getattr(f, '__name__', repr(f))}{where}"


def checked(f: F, *, static_argnums: Any = None, static_argnames: Any = None, donate_argnums: Any = None,
            donate_argnames: Any = None) -> F:
    """``f``, compiled with every TensorArray check as data; raises the first error it recorded.

    ``jta.checked(f)(*args)`` is ``jax.jit(jta.checkify(f))(*args)`` followed by
    ``errors.throw()``: it raises the first error in program order (including errors held by
    the arrays and raw-op states ``f`` returns) as jta's exception with TensorFlow's text,
    before handing back ``f``'s value. It is ``jax.jit`` underneath: one compilation per
    argument shape and static value (jit's own cache), and outputs that are not arrays (a
    raw-op handle, a string) come back as they were returned. ``f`` may be jitted already.

    **Arguments:**

    - ``f``: the function.
    - ``static_argnums``, ``static_argnames``, ``donate_argnums``, ``donate_argnames``: as in
      ``jax.jit``; by default those of ``f``'s own ``jax.jit``, if it is one.

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> @jta.checked
    ... @jax.jit
    ... def last(xs, i):
    ...     return jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(xs).read(i)
    >>> last(jnp.arange(3.0), 2)
    Array(2., dtype=float32)
    >>> last(jnp.arange(3.0), 7)
    Traceback (most recent call last):
    jta.errors.InvalidArgumentError: Tried to read from index 7 but array size is: 3
    TensorArray 'TensorArray', at <doctest ...>:4 (last)

    ```

    The exception is TensorFlow's (class and text); its note (PEP 678) names the array and the
    line that ran the op.
    """
    info = getattr(f, "_jit_info", None)
    nums, names = static_arguments(f, static_argnums, static_argnames)
    if donate_argnums is None and donate_argnames is None and info is not None:
        donate_argnums, donate_argnames = info.donate_argnums, info.donate_argnames
    checkified = checkify(f, static_argnums=nums, static_argnames=names)
    donates = any(d is not None and d != () for d in (donate_argnums, donate_argnames))  # donate_argnums=0 too
    learned: dict[capacities.Key, int] = {}  # sizes the data decides (jta._core.capacities)
    compiled: dict[tuple[tuple[capacities.Key, int], ...], Callable[..., Any]] = {}
    unsized: dict[tuple[tuple[capacities.Key, int], ...], tuple[int, ...]] = {}  # per plan: capacities.Plan.unsized
    guessed: dict[tuple[tuple[capacities.Key, int], ...], tuple[int, ...]] = {}  # per plan: capacities.Plan.guessed
    most: dict[tuple[tuple[capacities.Key, int], ...], dict[int, int]] = {}  # per plan: capacities.Plan.most

    def plan_key(rows: dict[capacities.Key, int]) -> tuple[tuple[capacities.Key, int], ...]:
        return tuple(sorted(rows.items())) if rows else ()

    def compiled_for(rows: dict[capacities.Key, int]) -> Callable[..., Any]:
        key = plan_key(rows)
        if key not in compiled:
            @functools.wraps(f)
            def traced(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
                with capacities.planned(rows) as plan:
                    try:
                        errors, out = checkified(*args, **kwargs)
                    finally:
                        guessed[key], most[key] = tuple(plan.guessed), dict(plan.most)
                unsized[key] = tuple(plan.unsized)
                now = known.value(errors.record)
                if now is not None and not now.any():  # no error, known while tracing: nothing to fetch
                    return None, jax.tree_util.tree_map(_StaticLeaf.wrap, out)
                return {_Sites(errors.sites): errors.record}, jax.tree_util.tree_map(_StaticLeaf.wrap, out)

            compiled[key] = jax.jit(traced, static_argnums=nums, static_argnames=names, donate_argnums=donate_argnums,
                                    donate_argnames=donate_argnames)
        return compiled[key]

    program: Optional[Callable[..., Any]] = None  # compiled_for(learned), while ``learned`` stays

    def probed(number: int, args: tuple[Any, ...], kwargs: dict[str, Any], guesses_before: bool
               ) -> Optional[dict[int, int]]:
        """The sizes guessed in the plan up to number ``number``, from ``f`` compiled up to where its
        trace asks for that one (a trace that failed with a guess, 0 rows added to a fixed shape, never
        ran); ``None`` where they cannot be had so (asked for inside a loop body, a branch or a nested
        ``jit``, whose traced sizes cannot leave them). ``guesses_before``: sizes before ``number`` are
        guessed too, so a check that fails in the probe may be the guess's doing: ``{}``, not the error."""
        # f's own jax.jit would trace it apart (the sizes could not leave): the function it wraps, traced
        # as the failed trace was (under jax.grad the sizes are numbered as there)
        target = f
        while hasattr(target, "lower") and hasattr(target, "__wrapped__"):
            target = target.__wrapped__

        def stopped(*args: Any, **kwargs: Any) -> Any:
            with capacities.planned(learned, probe=number):
                try:
                    target(*args, **kwargs)
                except capacities.SizeProbe as found:
                    return {k: jnp.asarray(v) for k, v in found.sizes.items()}
            raise LookupError(number)  # (not asked for: the trace took another path)

        take_raised()
        try:
            errors, sizes = jax.jit(checkify(stopped, static_argnums=nums, static_argnames=names),
                                    static_argnums=nums, static_argnames=names)(*args, **kwargs)
            record = np.asarray(errors.record)
        except Exception:  # noqa: BLE001 - the trace's own failure is the one to report
            return None
        if _holds_error(record) and _learned(record, errors.sites, learned) is None:
            if guesses_before:
                return {}
            errors.throw()  # a check failed before the size, on known sizes: the first error
        return {k: int(v) for k, v in sizes.items()}

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # The common call, in as little Python as it takes (each step here is time on every call):
        # arguments as given, the program of the sizes learned so far, one trip of the record to
        # the host, its code read as a scalar. Anything else (an error, a size to learn, an
        # exception from the program, a batched record) is finished by ``settle``.
        nonlocal program
        if not (_KEPT.issuperset(map(type, args)) and (not kwargs or _KEPT.issuperset(map(type, kwargs.values())))):
            args, kwargs = _as_given(args, kwargs, nums, names)
        if _PENDING:
            take_raised()  # forget an error that an earlier, unchecked call left behind
        run = program
        if run is None:
            run = program = compiled_for(learned)
        try:
            errors, out = run(*args, **kwargs) if kwargs else run(*args)  # (no empty dict: jit's call is faster)
        except Exception as failure:  # noqa: BLE001 - settle re-raises what it cannot learn from
            return settle(args, kwargs, failure)
        if errors is None:  # no error, known while tracing
            return _returned(out) if _DISABLE_JIT.value else out
        ((sites, staged),) = errors.items()
        if staged.__class__ is ArrayImpl:  # (not a tracer: jta.checked under vmap or grad)
            # Waited for first: NumPy's conversion of a buffer still being computed waits at more
            # cost (about 2 µs on XLA:CPU) than this wait and the conversion of a ready one.
            staged.block_until_ready()
        record = np.asarray(staged)  # one trip to the host per call
        if record.ndim == 1 and not record[0]:  # no error: the common case, decided at once
            return _returned(out) if _DISABLE_JIT.value else out
        return settle(args, kwargs, (ErrorRecord(staged, sites.sites), out, record))

    def settle(args: tuple[Any, ...], kwargs: dict[str, Any], outcome: Any) -> Any:
        """The rest of a call: ``outcome`` is what its program did (an exception it raised, or
        ``(errors, out, record)``); learning reruns the program (``None``: run it now)."""
        nonlocal learned, program
        relearned: set[capacities.Key] = set()
        probed_now: set[int] = set()  # the sizes probes gave in this call
        one_by_one = False  # a probe for each guessed size, in trace order (see below)
        retried: dict[int, int] = {}  # the sizes no probe reaches, guessed again: how often (see below)
        largest: dict[int, int] = {}  # the largest each guessed size can be, where the shapes tell
        afresh = False  # the sizes of earlier calls were forgotten (see below)
        while True:
            if outcome is None:
                take_raised()  # forget an error that an earlier, unchecked call left behind
                try:
                    errors, out = compiled_for(learned)(*args, **kwargs)
                except Exception as failure:  # noqa: BLE001 - re-raised below unless learned from
                    outcome = failure
                else:
                    outcome = (None if errors is None else ErrorRecord(*_unpacked(errors)), out, None)
            if isinstance(outcome, capacities.CountNeeded):  # a loop unrolled to a count the data decides
                # learned from a program up to the loop's end (after the sizes guessed before it, each from
                # its own probe); where none can be had, from the whole trace, the loop's steps guarded
                number = outcome.number
                before = [n for n in guessed.get(plan_key(learned), ()) if n != number and ("size", n) not in learned]
                target = before[0] if before else number
                sizes = probed(target, args, kwargs, guesses_before=False)
                if not sizes or target not in sizes or \
                        target == number and sizes[number] == learned.get(("size", number)):  # (nothing new)
                    learned = {**learned, ("unprobed", number): 1}
                for n, size in (sizes or {}).items():
                    learned = capacities.sized(learned, n, size)
                probed_now, program, outcome = probed_now | set(sizes or ()), None, None
                continue
            if isinstance(outcome, UnimplementedError):  # a dynamic_size array written at a traced index
                number = getattr(outcome, "plan_number", None)
                if number is None or ("rows", number) in learned:
                    raise outcome
                learned, program, outcome = capacities.grown(learned, number, 0), None, None  # a first buffer of INITIAL_ROWS rows
                continue
            if isinstance(outcome, jax.errors.JaxRuntimeError):
                exc = take_raised(outcome)  # a check reported outside the threaded program (a custom rule)
                if exc is None:
                    raise outcome
                raise exc from None
            if isinstance(outcome, Exception):  # the trace failed: perhaps with a size it guessed
                # One probe, up to the last guessed size, learns them all, unless one is computed from
                # another's guess (a Where of a Range's rows): then the next trace fails too, or the
                # probe's checks do. Then each size is probed apart, in trace order, the sizes before
                # it known: slower (a compilation each), and right.
                numbers = guessed.get(plan_key(learned), ())
                earlier = {k for k in learned if k[0] == "size" and k[1] not in probed_now and k not in relearned}
                if not afresh and earlier:
                    # sizes learned in an earlier call, which this call's values may not have (a shape
                    # an argument gives, checked while tracing): learned afresh, once, before a failure
                    # is reported
                    learned = {k: v for k, v in learned.items() if k not in earlier}
                    afresh, program, outcome = True, None, None
                    continue
                sizes = probed(numbers[0] if one_by_one else numbers[-1], args, kwargs,
                               guesses_before=not one_by_one and len(numbers) > 1) if numbers else None
                unknown = [n for n in numbers if ("size", n) not in learned]
                if sizes is None:
                    # asked for where no probe reaches (a loop body, a branch): the guess of 0 rows may be
                    # what failed (a softmax or x[0] of no rows), so trace again guessing 1, and where that
                    # is not it either (x[1], top_k(x, 2)), the largest each size can be (a Where's input's
                    # size, a buffer's rows); the run then reports the sizes, learned as any are (or refused,
                    # where they differ from step to step)
                    largest.update(most.get(plan_key(learned), {}))
                    again = {n: 1 for n in unknown if n not in retried} or {
                        n: largest[n] for n, tries in retried.items() if tries == 1 and largest.get(n, 1) > 1
                        and ("size", n) not in relearned}  # (a size a run reported is not a guess)
                    if again:
                        for n, rows in again.items():
                            learned = capacities.sized(learned, n, rows)
                            retried[n] = retried.get(n, 0) + 1
                        probed_now, program, outcome = probed_now | set(again), None, None
                        continue
                if not one_by_one and (sizes == {} or probed_now and not numbers):
                    learned = {k: v for k, v in learned.items() if k[0] != "size" or k[1] not in probed_now}
                    one_by_one, program, outcome = True, None, None
                    continue
                if not sizes or any(("size", n) in learned for n in sizes):  # (nothing new: never for ever)
                    raise outcome
                probed_now |= set(sizes)
                for n, size in sizes.items():
                    learned = capacities.sized(learned, n, size)
                program, outcome = None, None
                continue
            errors, out, record = outcome
            outcome = None
            if errors is None:  # no error, known while tracing
                return _returned(out)
            if record is None:
                record = np.asarray(errors.record)  # one trip to the host per call
            if not _holds_error(record):  # no error
                return _returned(out)
            update = _learned(record, errors.sites, learned)
            if update is None or update == learned or donates:  # (nothing new learned: never rerun for ever)
                break
            sizes = _sizes_reported(record)
            varied = {("varies", n) for _, n in sizes & relearned} - learned.keys()
            if varied:  # a size learned twice in one call differs within a run (stack() in a loop body): a
                # short bounded loop asking for it unrolls its steps, each learning its own (the rest refuse)
                learned, program = {**learned, **dict.fromkeys(varied, 1)}, None
                continue
            if sizes & relearned:
                break
            relearned |= sizes
            learned, program = capacities.alike(update, sizes, unsized.get(plan_key(learned), ())), None
        errors.throw()
        return _returned(out)

    return cast(F, wrapper)


def _holds_error(record: np.ndarray) -> bool:
    """Whether a concrete record (batched or not) holds an error: its code, read as a scalar when
    it is one record (``record.any()`` costs a NumPy reduction, on every call)."""
    return bool(record[0]) if record.ndim == 1 else bool(record[..., 0].any())


class _Sites:
    """A trace's table of sites, carried out of ``jax.jit`` as the key of a one-entry dict
    ``{_Sites: record}``: static data of the output tree that unflattening a dict gives back in
    C++, where a node class of jta's own (:class:`ErrorRecord`) costs two Python calls per call.
    Hashed by identity: two traces never share one."""

    __slots__ = ("sites",)

    def __init__(self, sites: tuple[Site, ...]):
        self.sites = sites


def _unpacked(errors: dict[_Sites, Any]) -> tuple[Any, tuple[Site, ...]]:
    """``(record, sites)`` from a compiled program's ``{_Sites: record}``."""
    ((sites, record),) = errors.items()
    return record, sites.sites


_DISABLE_JIT = jax_config.disable_jit
_PENDING = callbacks.RAISED  # what callbacks raised in compiled code and no one took yet (the same list)


def _returned(out: Any) -> Any:
    """``out`` as the compiled call returned it; under ``jax.disable_jit()``, where ``jax.jit``
    calls ``traced`` as it is and nothing unflattens the leaves that :class:`_StaticLeaf`
    wrapped, with those leaves unwrapped."""
    if not jax_config.disable_jit.value:
        return out
    return jax.tree_util.tree_map(lambda x: x.value if isinstance(x, _StaticLeaf) else x, out,
                                  is_leaf=lambda x: isinstance(x, _StaticLeaf))


def _as_given(args: tuple[Any, ...], kwargs: dict[str, Any], nums: tuple[int, ...], names: tuple[str, ...]
              ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments, with those ``jax.jit`` would change before ``f`` sees them passed as static
    values instead (:class:`_Given`), so that they mean in ``jta.checked`` what they mean eagerly."""
    if _KEPT.issuperset(map(type, args)) and (not kwargs or _KEPT.issuperset(map(type, kwargs.values()))):
        return args, kwargs  # (the common case, on every call: nothing to wrap; in C, no generator)
    positions = {n % len(args) if args and n < 0 else n for n in nums}
    return (tuple(a if k in positions else _Given.wrap(a) for k, a in enumerate(args)),
            {k: v if k in names else _Given.wrap(v) for k, v in kwargs.items()})


# Argument types that :meth:`_Given.wrap` returns as they are, whatever their value (it looks at
# the top level only): a jax array, a float, a container.
_KEPT = frozenset({ArrayImpl, float, complex, list, tuple, dict, type(None)})


class _Given:
    """An argument that tracing would change, passed to ``f`` as it was given (a static value,
    one compilation per value): an integer outside the range of the dtype ``jax.jit`` gives it
    (with x64 off, ``np.int64(2**33)`` would become 0: eagerly it is an index out of range); a
    bool is traced as an ``int32`` instead (:meth:`wrap`). Flattened by ``jax.jit`` into static
    data; unflattened as :class:`functionalize.Static`, which ``jta.checkify`` hands to ``f`` as it
    is."""

    __slots__ = ("value", "key")

    def __init__(self, value: Any):
        self.value = value
        if isinstance(value, int):
            self.key: tuple[Any, ...] = (type(value), value)
        else:
            self.key = (type(value), value.dtype.str, np.shape(value), np.asarray(value).tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Given) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @staticmethod
    def wrap(value: Any) -> Any:
        if isinstance(value, (bool, np.bool_)):
            # Traced as the integer a bool is eagerly (index True is slot 1), where jax.jit would
            # trace a bool (an index TensorFlow refuses). Not static: an index computed from it
            # would make an error in a branch that does not run raise while tracing.
            return np.int32(value)
        if type(value) is int:  # a Python int: jax.jit gives it the default int dtype
            info = np.iinfo(jax.dtypes.canonicalize_dtype(jnp.int64))
            return value if info.min <= value <= info.max else _Given(value)
        if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "iu" and value.size:
            kept = jax.dtypes.canonicalize_dtype(value.dtype)
            if kept != value.dtype:  # narrowed (64 bits with x64 off): only values that fit survive
                info = np.iinfo(kept)
                if value.min() < info.min or value.max() > info.max:
                    return _Given(value)
        return value


jax.tree_util.register_pytree_node(_Given, lambda given: ((), given), lambda given, _: cast(Any, Static(given.value)))


_SIZE_LEARNED = (Error.ARRAY_SIZE_LEARNED.code, Error.RESULT_SIZE_LEARNED.code, Error.LOOP_STEPS_LEARNED.code)


def _sizes_reported(record: np.ndarray) -> set[capacities.Key]:
    """The size that a (concrete, learned from) ``record`` says a ``stack()`` returns, if it is one. A
    negative size is not one: a loop unrolled to a learned trip count ran past its steps (a lower bound,
    which the next run may raise again or replace by the count; see ``_growing_loops``)."""
    return {("size", int(record[3]))} if code_of(int(record[0])) in _SIZE_LEARNED and int(record[1]) >= 0 \
        else set()


def _learned(record: np.ndarray, sites: tuple[Site, ...], plan: dict[capacities.Key, int]
             ) -> Optional[dict[capacities.Key, int]]:
    """The plan updated with what the concrete ``record`` says outgrew it (``jta.checked`` reruns
    with it): a loop's stacks, a planned array's buffer (a write past it) or the size its
    ``stack()`` returns; ``None`` for any other record."""
    if record.ndim != 1 or not record[0]:
        return None
    word, v1, v2, v3, site = (int(v) for v in record)
    code = code_of(word)
    if code == Error.LOOP_STACK_FULL.code:
        return capacities.grown(plan, v1, v2)
    if code in _SIZE_LEARNED:
        return capacities.sized(plan, v3, v1)
    fields = dict(sites[site].fields) if site < len(sites) else {}
    index = v1 + (v3 << 32)
    if code == Error.WRITE_BEYOND_CAPACITY.code and "plan" in fields:  # (an array's every error names its plan)
        number = int(fields["plan"])  # the largest index written: its size too, when written in order
        return capacities.sized(capacities.grown(plan, number, index + 1), number, index + 1)
    if "grows" in fields:  # a write at ``index`` past a buffer of ``base + per * rows`` (an imported TensorList)
        base, per = int(fields["base"]), int(fields["per"])
        return capacities.grown(plan, int(fields["grows"]), -(-(index + 1 - base) // per))
    return None


class _StaticLeaf:
    """An output leaf that is not an array, carried as static data of ``jax.jit``'s output
    tree: unflattening the tree gives the value itself back, so each trace's values come back
    with its own outputs, at no cost per call."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    @staticmethod
    def wrap(leaf: Any) -> Any:
        return leaf if is_traceable(leaf) else _StaticLeaf(leaf)


jax.tree_util.register_pytree_node(_StaticLeaf, lambda leaf: ((), leaf.value), lambda value, _: value)
