"""Every error jta raises: TensorFlow's exception class and message template, written once.

Each member of :class:`Error` is one failure, in the style of Lineax's ``RESULTS``. Static
problems are raised with ``Error.X.raise_(**fields)``; problems that depend on traced values
are recorded as data (``jta._checks``) under the member's ``code`` with up to three integer
fields (the member's ``fields``, in order) and formatted by the same template when raised.

Texts are TensorFlow's (``tensorflow/core/kernels/tensor_array_ops.cc``, ``tensor_array.h``,
``tensor_array.cc`` and ``tensorflow/python/ops/tensor_array_ops.py``); messages marked
*jta* describe what only jta can hit (static capacities, traced lengths) or inputs on which
TensorFlow aborts the process.
"""

from __future__ import annotations

import enum
import itertools
import re
from typing import Any, NoReturn

import numpy as np

from ..errors import InvalidArgumentError, NotFoundError, ResourceExhaustedError, UnimplementedError

__all__ = ["Error", "Message"]

_Invalid, _Unimplemented, _NotFound = InvalidArgumentError, UnimplementedError, NotFoundError

_UNKNOWN_SHAPE_READ = (
    "TensorArray {name}: Could not read from TensorArray index {index}.  Furthermore, the element shape "
    "is not fully defined: {element_shape}.  It is possible you are working with a resizeable TensorArray "
    "and stop_gradients is not allowing the gradients to be written.  If you set the full element_shape "
    "property on the forward TensorArray, the proper all-zeros tensor will be returned instead of "
    "incurring this error.")
_CAPACITY_HINT = ("create it with TensorArray(..., dynamic_size=True, capacity=N), or call the function through "
                  "jta.checked, which learns it.")


class Message(enum.Enum):
    """A catalogue of messages: each member is ``(code, exception class, template, traced fields)``.

    :class:`Error` is jta's; the importer keeps its own (``jta.graph_import._messages``).
    """

    def __init__(self, code: int, cls: type[Exception], template: str, fields: tuple[str, ...] = ()):
        self.code, self.cls, self.template, self.fields = code, cls, template, fields

    def exception(self, **fields: Any) -> Exception:
        """The exception, its template filled with ``fields`` (``jta_error``: this member)."""
        exc = self.cls(self.template.format(**fields))
        exc.jta_error = self  # type: ignore[attr-defined]  # what the public layer adds a note to
        return exc

    def raise_(self, **fields: Any) -> NoReturn:
        raise self.exception(**fields)

    def matches(self, error: BaseException) -> bool:
        """Whether ``error`` is this member's: its class, and its text the template with any fields."""
        parts = re.split(r"\{[a-z_]+(?:![rs])?\}", self.template)
        pattern = "(?s)" + ".*?".join(re.escape(part) for part in parts)
        return type(error) is self.cls and re.fullmatch(pattern, str(error)) is not None

    def from_record(self, name: str, values: Any, extra: dict[str, str], unsigned: int = 0) -> Exception:
        """The exception for a traced record's integers ``values`` (in the order of ``fields``).
        ``unsigned``: the record's mask of fields that hold a ``uint64`` (see :func:`code_word`)."""
        ints = [int(v) for v in values]
        held = {self.fields[k] for k in range(min(len(ints), len(self.fields))) if unsigned >> k & 1}
        ints = [v % 2**64 if unsigned >> k & 1 else v for k, v in enumerate(ints)]
        fields = dict(zip(self.fields, ints, strict=False))
        # A field read as unsigned is its value whole: its ``<f>_high`` word (if any) adds nothing.
        fields = _wide({k: 0 if k.endswith("_high") and k[:-5] in held else v for k, v in fields.items()})
        if "rest" in extra:
            extra = {**extra, "python_rest": _python_rest(extra["rest"])}
        written: dict[str, Any] = dict(fields)
        if "index_shape" in extra and "index" in fields:  # a flat index, written as TF writes its place
            written["index"] = unravelled(fields["index"], extra["index_shape"])
        for length, (field, separator) in _LISTED.items():
            if length in extra:
                count, shown = int(extra[length]), (str(fields[k]) for k in ("first", "second"))
                written[field] = separator.join(itertools.islice(shown, count)) + (separator + "...") * (count > 2)
        return self.exception(name=name, **written, **extra)

    @classmethod
    def by_code(cls, code: int) -> Message | Unsigned:
        """The member of any catalogue (``Error``, the importer's ``GraphError``) whose code is ``code``:
        a traced record holds only the code, so codes are unique across catalogues. ``code`` is a
        record's code word (:func:`code_word`): where it says that some fields hold unsigned values,
        the member comes as :class:`Unsigned`, which reads them so."""
        code, unsigned = code_of(code), (int(code) >> CODE_BITS) & _UNSIGNED_MASK
        if code not in _BY_CODE:
            _BY_CODE.update((m.code, m) for catalogue in Message.__subclasses__() for m in catalogue)
        return _BY_CODE[code] if not unsigned else Unsigned(_BY_CODE[code], unsigned)


# -- a record's code word ---------------------------------------------------------------------------
# A record's integers are signed (int64 under x64), and an index or length may come as ``uint64``:
# past 2**63 its bits read as a negative int64, and no wider word holds its top bit. Whether a field
# is unsigned is known where the record is made (the value's dtype): it travels with the record, in
# the bits of its code word above the code (field k: bit ``CODE_BITS + k``, set when that field holds
# a uint64 whose top bit is set), as checkify's errors carry their static half with their code. The
# code word goes everywhere the record goes (loops, ``vmap``, the functionalized record, export),
# and is decoded only where the text is made (:meth:`Message.by_code`). A narrower unsigned value
# fits the record as it is (uint32 in an int64 record), or with its ``<f>_high`` word (a uint32 past
# 2**31 in the int32 record kept without x64: ``jta._core.storage.high_word``).
CODE_BITS = 16
_CODE_MASK = (1 << CODE_BITS) - 1
_UNSIGNED_MASK = 0b111  # a bit per field


def code_of(word: int) -> int:
    """The code of a record's code word (:func:`code_word`), without its unsigned fields' bits."""
    return int(word) & _CODE_MASK


def code_word(code: int, unsigned: int) -> int:
    """The code word of a record whose fields ``k`` with bit ``k`` of ``unsigned`` set hold
    uint64 values (their bits, as the record's int64)."""
    return code | unsigned << CODE_BITS


def unsigned_bit(field: int) -> int:
    """What the code word adds when field ``field`` (0: the record's first value) holds a uint64
    past 2**63."""
    assert 0 <= field < 3, "a record has three values"
    return code_word(0, 1 << field)


# A record that ``jta.checked`` learns a size from (a write past a buffer its plan sizes) sets
# :data:`LEARNS` in its code word: a later record of the same code word (and site) with a larger
# index replaces it (:func:`jta._records.primitives.learned_max`), and a loop keeps running after it
# for a while, so that one run measures what the buffer needs, where stopping at the first write
# past it would learn one doubling per run.
LEARNS = code_word(0, 1 << 3)


def learns(word: Any) -> Any:
    """Whether the code word ``word`` (an integer, or an array of them) marks a record to learn from."""
    return (word & LEARNS) != 0


class Unsigned:
    """A member of a catalogue, as a record whose code word marks ``unsigned`` fields reads it:
    :meth:`from_record` reads those fields as ``uint64``; everything else is the member's."""

    def __init__(self, message: Message, unsigned: int):
        self.message, self.unsigned = message, unsigned

    def from_record(self, name: str, values: Any, extra: dict[str, str]) -> Exception:
        return self.message.from_record(name, values, extra, unsigned=self.unsigned)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.message, attr)

    def __repr__(self) -> str:
        return f"Unsigned({self.message!r}, {self.unsigned:#b})"


_BY_CODE: dict[int, Message] = {}

# Lists a record holds in part (its fields ``first`` and ``second``: a record holds three integers): the
# key in ``extra`` that gives the list's length, the template field written and TensorFlow's separator.
_LISTED = {"depth": ("vector", ", "), "labels": ("values", " ")}


class Error(Message):
    """``(code, exception class, template, traced fields)``; code 0 is reserved for "no error"."""

    # -- recordable at traced values (code, class, template, fields of the int32 record) --------
    WRITE_OUT_OF_RANGE = (1, _Invalid, "TensorArray {name}: Tried to write to index {index} but array is "
                          "not resizeable and size is: {size}", ("index", "size", "index_high"))
    READ_OUT_OF_RANGE = (2, _Invalid, "Tried to read from index {index} but array size is: {size}",
                         ("index", "size", "index_high"))
    SCATTER_OUT_OF_RANGE = (3, _Invalid, "Max scatter index must be < array size ({index} vs. {size})",
                            ("index", "size", "index_high"))
    WRITE_BEYOND_CAPACITY = (4, _Invalid, "TensorArray {name}: Tried to write to index {index} beyond the "
                             "static capacity {capacity} of this dynamically sized array; pass a larger "
                             "`capacity=` when creating it.", ("index", "capacity", "index_high"))  # jta
    READ_BEYOND_CAPACITY = (5, _Invalid, "TensorArray {name}: Tried to read from index {index} beyond the "
                            "static capacity {capacity} of this gradient array; pass a larger `capacity=` "
                            "to the forward array.", ("index", "capacity", "index_high"))  # jta
    TRACED_RAGGED_SPLIT = (6, _Invalid, "TensorArray {name}: split lengths must all equal {expected} when "
                           "they are traced (the elements must share one shape), but lengths[{position}] is "
                           "{length}. Pass concrete lengths for ragged splits.",
                           ("position", "expected", "length"))  # jta
    SPLIT_SUM = (7, _Invalid, "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
                 "{total} and value's shape is: [{rows}{rest}]", ("total", "rows", "total_high"))
    NEGATIVE_SPLIT_LENGTH = (8, _Invalid, "TensorArray {name}: Split lengths must be non-negative, but "
                             "lengths[{position}] is {length}. (TensorFlow aborts the process here; jta "
                             "refuses the input.)", ("position", "length", "length_high"))
    WRITE_AFTER_READ = (9, _Invalid, "TensorArray {name}: Could not write to TensorArray index {index} "
                        "because it has already been read.", ("index",))
    WRITTEN_TWICE = (10, _Invalid, "TensorArray {name}: Could not write to TensorArray index {index} "
                     "because it has already been written to.", ("index",))
    READ_CLEARED = (11, _Invalid, "TensorArray {name}: Could not read index {index} twice because it was "
                    "cleared after a previous read (perhaps try setting clear_after_read = false?).",
                    ("index",))
    # A split at traced lengths: WRITE_SHAPE and INCONSISTENT_SHAPES (TF's Python layer, which
    # checks equal lengths) for a piece of ``length`` rows, against an element shape whose first
    # dim is ``expected``; ``rest`` (the trailing dims) is the array's, which the value's equal.
    SPLIT_PIECE_SHAPE = (13, _Invalid, "TensorArray {name}: Could not write to TensorArray index {index} "
                         "because the value shape is [{length}{rest}] which is incompatible with the "
                         "TensorArray's inferred element shape: [{expected}{rest}] (consider setting "
                         "infer_shape=False).", ("index", "length", "expected"))
    SPLIT_PIECES_INCONSISTENT = (14, ValueError, "Inconsistent shapes: saw ({length}{python_rest}) but expected "
                                 "({expected}{python_rest}) ", ("length", "expected", "length_high"))

    # -- static only ----------------------------------------------------------------------------
    CLOSED = (101, _Invalid, "TensorArray {name} has already been closed.")
    INDEX_NOT_SCALAR = (102, _Invalid, "TensorArray index must be scalar, but had shape: {shape}")
    SIZE_NOT_SCALAR = (103, _Invalid, "TensorArray size must be scalar, but had shape: {shape}")
    NEGATIVE_SIZE = (104, _Invalid, "Size should be >= 0.")
    WRITE_DTYPE = (105, _Invalid, "TensorArray dtype is {dtype} but Op is trying to write dtype {given}.")
    READ_DTYPE = (106, _Invalid, "TensorArray dtype is {dtype} but Op requested dtype {given}.")
    WRITE_SHAPE = (107, _Invalid, "TensorArray {name}: Could not write to TensorArray index {index} because "
                   "the value shape is {shape} which is incompatible with the TensorArray's inferred element "
                   "shape: {element_shape} (consider setting infer_shape=False).")
    AGGREGATE_SHAPE = (108, _Invalid, "TensorArray {name}: Could not aggregate to TensorArray index {index} "
                       "because the existing shape is {existing} but the new input shape is {shape}.")
    UNKNOWN_SHAPE_READ = (109, _Invalid, _UNKNOWN_SHAPE_READ)
    PACK_ZERO_UNKNOWN_SHAPE = (110, _Unimplemented, "TensorArray has size zero, but element shape {shape} is "
                               "not fully defined. Currently only static shapes are supported when packing "
                               "zero-size TensorArrays.")
    CONCAT_ZERO_UNKNOWN_SHAPE = (111, _Unimplemented, "TensorArray has size zero, but element_shape_except0 "
                                 "{shape} is not fully defined. Currently only static shapes are supported "
                                 "when concatenating zero-size TensorArrays.")
    INDICES_NOT_VECTOR = (112, _Invalid, "Expected indices to be a vector, but received shape: {shape}")
    LENGTHS_NOT_VECTOR = (113, _Invalid, "Expected lengths to be a vector, received shape: {shape}")
    SPLIT_VALUE_SCALAR = (114, _Invalid, "Expected value to be at least a vector, but received shape: {shape}")
    UNPACK_VALUE_SCALAR = (115, _Invalid, "Input value for unpack must be at least a vector but received "
                           "shape: {shape}")
    SCATTER_LENGTHS = (116, _Invalid, "Expected len(indices) == values.shape[0], but saw: {n} vs. {rows}")
    SPLIT_SIZE = (12, _Invalid, "TensorArray's size is not equal to the size of lengths ({size} vs. {n}), "
                  "and the TensorArray is not marked as dynamically resizeable", ("size", "n"))
    CONCAT_SCALAR = (118, _Invalid, "Concat saw a scalar shape at index {index} but requires at least "
                     "vectors.  Did you mean to call pack?")
    CONCAT_INCONSISTENT = (119, _Invalid, "TensorArray has inconsistent shapes.  Index 0 has (excepting "
                           "dimension 0) shape: {first} but index {index} has (excepting dimension 0) shape: "
                           "{shape}")
    CONCAT_ATTR = (120, _Invalid, "TensorArray was passed element_shape_except0 {attr} but index 0 has "
                   "(excepting dimension 0) shape: {shape} which does not match.")
    GATHER_ATTR = (121, _Invalid, "TensorArray was passed element_shape {attr} which does not match the "
                   "Tensor at index 0: {shape}")
    GATHER_INCONSISTENT = (122, _Invalid, "TensorArray has inconsistent shapes.  Index 0 has shape: {first} "
                           "but index {index} has shape: {shape}")
    MERGE_RANKS = (123, _Invalid, "PartialTensorShape: Incompatible ranks during merge: {a} vs. {b}")
    MERGE_SHAPES = (124, _Invalid, "PartialTensorShape: Incompatible shapes during merge: {a} vs. {b}")
    NOT_FOUND = (125, _NotFound, "Container per_step does not exist. (Could not find resource: "
                 "per_step/_tensor_arrays{handle})")
    WRONG_CONTAINER = (126, _Invalid, "Wrong input container. _tensor_array_grads{handle}")
    CONCAT_UNSPLIT_GRAD = (127, _Invalid, "TensorArray {name}: cannot concat a gradient array whose forward "
                           "array was never split (its concat size is unknown; TensorFlow aborts the process "
                           "here).")  # jta
    DYNAMIC_NEEDS_CAPACITY = (128, _Unimplemented, "TensorArray {name}: a dynamic_size array {what} needs a "
                              "static capacity; " + _CAPACITY_HINT)  # jta
    NEGATIVE_DIMENSION = (129, _Invalid, "Dimension {dim} must be >= 0")
    SHAPE_NOT_VECTOR = (131, _Invalid, "shape must be a vector of {{int32,int64}}, got shape {shape}")
    SIZE_TOO_LARGE = (130, _Invalid, "TensorArray {name}: {what} {size} does not fit TensorFlow's int32 "
                      "indices (at most 2147483647 slots).")  # jta: TF would try to allocate
    BUFFER_TOO_LARGE = (132, ResourceExhaustedError, "TensorArray {name}: {what} needs {nbytes} bytes ({slots} "
                        "slots of shape {shape} {dtype}) but this device holds at most {limit} bytes. jta "
                        "allocates every slot up front (TensorFlow allocates each element on its first "
                        "write): pass a smaller size, capacity or element shape.")  # jta
    UNSUPPORTED_PRIMITIVE = (133, _Unimplemented, "jta.checkify cannot thread TensorArray checks through the "
                             "JAX primitive '{primitive}' (it has no rule for it). Apply jta.checkify to the "
                             "function you pass to it, and return or jta.throw its ErrorRecord there.")  # jta
    EXPORT_NEEDS_CHECKIFY = (134, _Unimplemented, "jax.export cannot serialize the host callback through which "
                             "{what} {name} raises its error in compiled code (at {where}). Export "
                             "jax.jit(jta.checkify(f)) instead: its ErrorRecord output carries the errors as data, and "
                             "jta.throw(errors) raises them after the call.")  # jta
    OUTPUT_NOT_JAX_TYPE = (135, TypeError, "function {function} traced for jta.checkify returned a value of type "
                           "{type}, which is not a valid JAX type (jta also returns strings, bytes, dtypes, types and "
                           "enums as they are)")  # jta, in jax.jit's words
    # TypeError / ValueError: TensorFlow's Python layer (op-wrapper conversion of arguments).
    NONE_ARGUMENT = (301, ValueError, "Tried to convert '{param}' to a tensor and failed. Error: None values "
                     "not supported.")
    PYTHON_NOT_INT32 = (302, TypeError, "Expected int32 passed to parameter '{param}' of op '{op}', got "
                        "{value!r} of type '{type}' instead. Error: Expected int32, but got {element} of type "
                        "'{element_type}'.")
    TENSOR_NOT_INT32 = (303, TypeError, "Input '{param}' of '{op}' Op has type {dtype} that does not match "
                        "expected type of int32.")
    NOT_A_DTYPE = (304, TypeError, "Cannot convert the argument `type_value`: {dtype!r} to a TensorFlow DType.")
    WIDE_DTYPE_WITHOUT_X64 = (305, ValueError, "jta stores {dtype} only with 64-bit types enabled in JAX: call "
                              "jax.config.update('jax_enable_x64', True) first (or use {narrow}).")  # jta
    NONE_VALUE = (306, ValueError, "None values not supported.")
    INT_TOO_LARGE = (310, ValueError, "Can't convert a Python int of {bits} bits to {dtype}: it is too large "
                     "for any float (TensorFlow raises OverflowError).")
    NOT_CONVERTIBLE = (307, TypeError, "Failed to convert elements of {value} to Tensor. Consider casting "
                       "elements to a supported type. See https://www.tensorflow.org/api_docs/python/tf/dtypes "
                       "for supported TF dtypes.")
    STATIC_PREPEND_REQUIRED = (308, ValueError, "shape_to_prepend must be static (Python ints or a concrete "
                               "array): it is part of the accumulator's element shape.")  # jta
    BATCHED_OUTSIDE_VMAP = (309, ValueError, "TensorArray {name} holds a batch of arrays (batch shape "
                            "{batch}) made by jax.vmap; call its methods inside jax.vmap (for example "
                            "jax.vmap(lambda ta: ta.stack())(ta)).")  # jta
    # ValueError: TensorFlow's Python layer, or jta's trace-time limits.
    INCONSISTENT_SHAPES = (201, ValueError, "Inconsistent shapes: saw {shape} but expected {element_shape} ")
    SIZE_REQUIRED = (202, ValueError, "Argument `size` must be provided if handle is not provided.")
    NO_HANDLES = (203, ValueError, "jta.TensorArray has no resource handles; arrays are values. Pass the "
                  "TensorArray itself instead of its handle.")  # jta
    STATIC_SIZE_REQUIRED = (204, ValueError, "{what} needs a static `size` (a Python int): the buffer shape "
                            "must be known when tracing.")  # jta
    NAME_TAKEN_IN_REGISTRY = (211, ValueError, "TensorArray {name}: this gradient registry already holds the "
                              "accumulator for source '{source}' of another array named '{name}'. Arrays that "
                              "share a registry need distinct names: pass tensor_array_name= when creating "
                              "them (TensorFlow names every array uniquely).")  # jta
    STATIC_CAPACITY_REQUIRED = (210, ValueError, "`capacity` must be a static Python int (it is the buffer's "
                                "length, which must be known when tracing).")  # jta
    SIZE_ONLY_AT_RUN_TIME = (205, ValueError, "TensorArray {name}: {what} needs the array's size, which is only "
                             "known at run time here (a dynamically sized array grown at traced indices inside "
                             "jit). Call the function through jta.checked (which learns the size at run time), use "
                             "stack_padded() or gather() with static indices, or call it outside jit.")  # jta
    TRACED_INDEX_NEEDS_SHAPE = (206, ValueError, "TensorArray {name}: {what} needs a fully known element "
                                "shape, but it is {element_shape}. Pass element_shape= when creating the "
                                "array (or keep infer_shape=True and write once at a Python index).")  # jta
    TRACED_SPLIT_UNEQUAL = (207, ValueError, "TensorArray {name}: traced split lengths need equal pieces, "
                            "but {rows} rows do not divide into {n} pieces. Pass concrete lengths.")  # jta
    TRACED_SPLIT_NEVER_FITS = (212, ValueError, "TensorArray {name}: no lengths split a value of shape {shape} "
                               "into elements of shape {element_shape}: the dimensions after the first differ, "
                               "so the split fails whatever its lengths, and with traced lengths which error "
                               "TensorFlow reports depends on their values. Pass concrete lengths to get it, "
                               "or a value whose trailing dimensions match.")  # jta
    CAPACITY_NEEDS_SHAPE = (213, ValueError, "TensorArray {name}: a dynamic_size array with a capacity keeps "
                            "its capacity slots in one buffer, so its element shape must be known before its "
                            "first write, but it is {element_shape}. Pass element_shape= when creating the array "
                            "(or, outside jit, leave out capacity=).")  # jta
    NO_GRADIENT_SOURCE = (208, ValueError, "Expected op/tensor name to start with gradients (excluding "
                          "scope), got: {name}. This means that a tf.gradients op with this op in its "
                          "dependency path has a custom name that does not start with 'gradients'. Please "
                          "make sure all calls to tf.gradients that have non-empty `name` arguments use "
                          "names that start with 'gradients'.")
    NOT_AN_ACCUMULATOR = (209, ValueError, "{handle!r} is not an accumulator of this registry.")  # jta

    # -- jta.import_graph_def (static only, all jta's own) -----------------------------------------
    LOOP_BOUND_NOT_STATIC = (501, TypeError, "jta.while_loop: maximum_iterations must be a static Python int "
                             "(the number of rows of the stacks its derivative keeps), got {given}.")  # jta
    LOOP_BOUND_NEGATIVE = (502, ValueError, "jta.while_loop: maximum_iterations must be >= 0, got {bound}.")  # jta
    LOOP_NEEDS_BOUND = (503, _Unimplemented, "jta.while_loop: differentiating a loop whose trip count is only known "
                        "at run time keeps each step's residuals on stacks, which need a static number of rows: "
                        "call the function through jta.checked (which learns the rows at run time and compiles "
                        "again when they run out), or pass maximum_iterations=N (the loop also stops after N "
                        "steps, as tf.while_loop does).")  # jta
    LOOP_STACK_FULL = (504, _Unimplemented, "jta.while_loop: loop {loop} of the differentiated program ran {steps} "
                       "steps, more than the {capacity} rows its stacks had in this compilation. jta.checked grows "
                       "them and runs the function again; here it cannot (the function was called through "
                       "jta.checkify, or with donated arguments): pass maximum_iterations=N, or call it once "
                       "through jta.checked without donation.", ("loop", "steps", "capacity"))  # jta
    LOOP_STACK_UNPLANNED = (507, _Unimplemented, "jta.while_loop: a loop of the differentiated program ran {steps} "
                            "steps, more than the {capacity} rows its stacks have outside jta.checked: call the "
                            "function through jta.checked (jta.checked(jax.jit(fn))), which learns the rows at run "
                            "time and compiles again when they run out, or call it eagerly.",
                            ("steps", "capacity"))  # jta
    ARRAY_SIZE_LEARNED = (505, _Unimplemented, "TensorArray {name}: stack() of this dynamically sized array "
                          "has {size} rows at run time, which jta.checked learns and compiles for (it returned "
                          "{guess} rows in this compilation); here it cannot (the function was called through "
                          "jta.checkify or with donated arguments, or the size differs between the stack() calls "
                          "of one run, as inside a loop body): use stack_padded(), or call it through "
                          "jta.checked without donation, outside the loop.", ("size", "guess", "plan"))  # jta
    RESULT_SIZE_LEARNED = (506, _Unimplemented, "{name}: its result has {size} rows at run time (the data decides "
                           "them), which jta.checked learns and compiles for (it gave {guess} rows in this "
                           "compilation); here it cannot (the function was called through jta.checkify or with "
                           "donated arguments, or the rows differ between the runs of this op in one call, as "
                           "inside a loop body or between the members of a jax.vmap batch: an imported loop of a "
                           "static trip count, or a TF2 loop of a static bound that keeps no tape, is unrolled up to 64 "
                           "steps (import_graph_def: max_unroll), so that each "
                           "step learns its own; an eager call runs any loop step by step; an import with "
                           "pad_stacks=True pads a stack of a loop's rows that is only summed).",
                           ("size", "guess", "plan"))  # jta
    LOOP_STEPS_LEARNED = (508, _Unimplemented, "Loop {name}: its variables change shape from step to step, so "
                          "jta.checked unrolls it to the trip count a run takes (the data decides it), which it "
                          "learns and compiles for; this run's count ({size}; -s: more steps than unrolled, s to "
                          "unroll next) is not the one compiled for ({guess}; -s: s steps unrolled before a run "
                          "told it); here it cannot (the function was called through jta.checkify or with donated "
                          "arguments, or the count differs between the runs of this loop in one call, as inside "
                          "another loop's body or between the members of a jax.vmap batch): call it through "
                          "jta.checked without donation, or eagerly.", ("size", "guess", "plan"))  # jta


def _wide(fields: dict[str, int]) -> dict[str, int]:
    """Fold each ``<f>_high`` field into ``<f>``: a record made before x64 was enabled holds 32-bit
    integers, so a 64-bit value (an int64 index or length) is stored as its low word (signed)
    and ``(value - low) >> 32`` (``0`` in a 64-bit record)."""
    highs = {k for k in fields if k.endswith("_high") and k[:-5] in fields}
    return {k: v + (fields.get(k + "_high", 0) << 32) for k, v in fields.items() if k not in highs}


def unravelled(index: int, shape: str) -> str:
    """The flat ``index`` of a tensor of ``shape`` (``"2,3"``) as TensorFlow names an element of it in
    an error (``"1,2"``; a vector's ``"5"``): a traced record holds one integer for the place."""
    dims = tuple(int(d) for d in shape.split(",") if d)
    return ",".join(str(int(i)) for i in np.unravel_index(index, dims)) if len(dims) > 1 else str(index)


def _python_rest(rest: str) -> str:
    """The trailing dims ``rest`` (``",2,3"``, as in ``[4,2,3]``) as ``str(tf.TensorShape)`` writes
    them after the first (``", 2, 3"``; ``","`` for a vector, as in ``(4,)``)."""
    return rest.replace(",", ", ") if rest else ","
