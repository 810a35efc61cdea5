"""The importer's messages: what ``jta.import_graph_def`` refuses, and why (all jta's own).

They share :class:`jta._records.catalogue.Message` with the TensorArray errors (class, template,
``raise_``) but live here, with the code that raises them.
"""

from __future__ import annotations

from .._records.catalogue import Message
from ..errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    OutOfRangeError,
    UnimplementedError,
)

__all__ = ["GraphError"]


class GraphError(Message):
    """Static refusals of the importer and run-time checks of its ops, codes 401-499 and 620-639."""

    UNSUPPORTED = (401, UnimplementedError, "jta.import_graph_def cannot run this graph; unsupported:\n{items}")
    NEEDS_TF = (402, ImportError, "jta.import_graph_def parses graphs with TensorFlow: pip install "
                      "\"jta[tf]\" ({error}).")
    UNKNOWN_TENSOR = (403, ValueError, "jta.import_graph_def: the graph has no tensor {tensor!r} ({what}).")
    ARGUMENT_COUNT = (404, TypeError, "The imported graph takes {expected} inputs ({names}), got {given}.")
    NOT_STATIC = (405, UnimplementedError, "Node {node} ({op}): {what} must be static (computable from "
                        "constants and shapes while tracing), but it depends on the inputs' values. An eager call "
                        "(outside jax.jit and jax.grad) knows them.")
    STACK_CAPACITY = (406, UnimplementedError, "Stack {stack}: pushed inside the while loop {frame}, whose "
                            "trip count is not static here; pass stack_capacity=N to jta.import_graph_def, or call the "
                            "imported function through jta.checked, which learns it.")
    LOOP_STRUCTURE = (407, UnimplementedError, "While loop {frame}: {what}")
    MERGE_HANDLES = (408, UnimplementedError, "Node {node}: a Merge of different resources ({a} and {b}) "
                           "under a condition that is only known at run time.")
    MERGE_SHAPES = (409, UnimplementedError, "Node {node}: a Merge of shapes {a} and {b} under a condition "
                          "that is only known at run time (the result's shape would depend on it). {way_out}")
    SOURCE = (410, TypeError, "jta.import_graph_def takes a GraphDef, a tf.Graph or the path of a binary "
                    ".pb file, not {given}.")
    NO_FILE = (411, FileNotFoundError, "jta.import_graph_def: there is no file {path!r} (it takes a GraphDef, "
                     "a tf.Graph or the path of a binary .pb file).")
    BAD_FILE = (412, ValueError, "jta.import_graph_def: {path!r} ({size} bytes) is not a binary GraphDef "
                      "({error}). It takes a GraphDef, a tf.Graph or the path of a binary .pb file (one written "
                      "by tf.io.write_graph(..., as_text=False) or GraphDef.SerializeToString()); parse a text "
                      ".pbtxt into a GraphDef with google.protobuf.text_format.Parse first.")
    TENSOR_NAMES = (413, TypeError, "jta.import_graph_def: {what} must be a list of tensor names such as "
                          "['x:0'], got {given}.")
    NO_OUTPUT = (414, ValueError, "jta.import_graph_def ({what}): The name {tensor!r} refers to a Tensor "
                       "which does not exist. The operation, {node!r}, exists but only has {count} outputs.")
    FEED_SHAPE = (415, ValueError, "Cannot feed value of shape {shape} for Tensor {tensor}, which has "
                        "shape {expected}")
    FEED_INT = (416, TypeError, "Type of feed value {value} with type {kind} is not compatible with "
                      "Tensor type {dtype}. Try explicitly setting the type of the feed tensor to a larger "
                      "type (e.g. int64).")
    LOOP_CARRY = (417, UnimplementedError, "While loop {frame}: the loop body changes the structure of its carry "
                        "({what}), so the loop is neither a lax.scan nor a lax.while_loop. {way_out}")
    INTERNAL = (418, UnimplementedError, "Node {node} ({op}): jta.import_graph_def failed inside with {error}. "
                      "This is a construct the importer does not handle; please report it with the graph.")
    TRACED_ARRAY = (422, UnimplementedError, "Node {node} ({op}): under jax.jit its TensorArray ({array}) meets "
                          "a limit of traced code: {error} The way out: call the imported function outside "
                          "jax.jit (with concrete inputs its loops run step by step), or give the TensorArray a "
                          "full element_shape= where the graph creates it.")
    GUARDED_LOOP = (420, UnimplementedError, "While loop {frame}: it sits in a cond branch whose predicate is "
                          "only known at run time, so it runs as {kind} in both branches and its effects must be "
                          "dropped where its branch is not taken, but {what}, so the states with and without it "
                          "differ in structure, not only in values. Feed the cond's predicate as a constant (the "
                          "other branch is then pruned), or let the loop be a lax.scan: give its TensorArrays a "
                          "full element_shape= and pass tensor_array_capacity= / stack_capacity=.")
    GUARDED_STATE = (421, UnimplementedError, "Node {node} ({op}): it sits in a cond branch whose predicate is "
                           "only known at run time, so both branches run and their TensorArrays and stacks are "
                           "selected between, but {what}, so the two states differ in structure, not only in "
                           "values. Feed the cond's predicate as a constant (the other branch is then pruned), or "
                           "give the TensorArray a full element_shape= where it is created (and pass "
                           "tensor_array_capacity= for a dynamic_size one).")
    # -- TF2 programs: jta.import_function / jta.import_saved_model (codes 430+) ---------------
    TF2_UNSUPPORTED = (430, UnimplementedError, "jta.import_function cannot run this function; unsupported:\n{items}")
    TF2_SOURCE = (431, TypeError, "jta.import_function takes a tf.function (traced with the example arguments) or "
                       "a ConcreteFunction, not {given}.")
    TF2_ARGUMENTS = (432, TypeError, "The imported function takes {expected} arguments ({names}), got {given}.")
    TF2_PARAMS = (433, KeyError, "The imported function reads {name!r} (a variable, or a random op's "
                       "generator), which params lacks (params holds: {known}).")
    INVALID_ARGUMENT = (434, InvalidArgumentError, "Node {node} ({op}): {error}")  # (TF's text of a check)
    FAILED_PRECONDITION = (485, FailedPreconditionError, "Node {node} ({op}): {error}")  # (TF's, of that class)
    LIST_CAPACITY = (435, UnimplementedError, "Node {node} ({op}): {what} The ways out: call the imported function "
                          "through jta.checked (jta.checked(jax.jit(fn))), which learns the buffer's rows at run time "
                          "and compiles again when they run out; give the loop a static bound (maximum_iterations= of "
                          "tf.while_loop, or a for loop over tf.range(n) with a static n); or call it eagerly "
                          "(outside jax.jit and jax.grad), where loops run step by step.")
    TF2_LOOP = (436, UnimplementedError, "Loop {node} ({op}): {what}")
    BUFFER_SHAPE = (487, UnimplementedError, "Node {node} ({op}): an element of shape {shape} goes into a list whose "
                         "buffer holds elements of shape {buffer}: TensorFlow's list takes elements of any shape its "
                         "declared element shape admits, a buffer (a list a loop carries) one (the data decides "
                         "each step's shape here). The way out: call the imported function eagerly (outside "
                         "jax.jit and jax.grad), where loops run step by step.")
    PADDED_USE = (488, UnimplementedError, "Node {node} ({op}) reads the stack {stack}, which pad_stacks=True "
                       "padded with zero rows past its run-time length: TensorFlow's stack has no such rows, and this "
                       "op could see them (only the function's outputs, sums and ops that keep zeros zero on the way "
                       "to them cannot). The ways out: import without pad_stacks and call the imported function "
                       "through jta.checked (jta.checked(jax.jit(fn))), which learns the length at run time and "
                       "compiles for it, or eagerly with concrete arguments (its loops then run step by step).")
    SIGNATURE = (437, KeyError, "jta.import_saved_model: the SavedModel at {path!r} has no signature or "
                      "tf.function attribute {name!r} (signatures: {known}).")
    PADDED_STACK = (438, UnimplementedError, "Node {node} ({op}): the list's length is only known at run time "
                         "(it was written in a loop whose trip count the data decides, under a JAX transformation: jax.jit, "
                         "jax.grad, jax.vmap and what builds on it, as jax.jacfwd), "
                         "so TensorFlow's result has a shape JAX cannot give. The ways out: call the imported "
                         "function through jta.checked (jta.checked(jax.jit(fn))), which learns the length at run "
                         "time and compiles for it, or eagerly with concrete arguments (its loops then run step by "
                         "step): the stack then has TensorFlow's shape; or import with pad_stacks=True: the stack then "
                         "has as many rows "
                         "as the loop's bound, the rows past the length zeros (as a fixed-size TensorArray's unwritten "
                         "rows are), for the function's outputs and sums only (any other use is refused).")
    TF2_BRANCH = (439, UnimplementedError, "Node {node} ({op}): its predicate is only known at run time, so it is "
                       "a lax.cond/lax.switch, whose branches must give outputs of one structure, shape and dtype "
                       "(TensorLists of one static length), but they do not ({error}). The ways out: call the "
                       "imported function through jta.checked (jta.checked(jax.jit(fn))), which learns the branch "
                       "taken at run time (one compilation per branch); pass the predicate as a concrete argument "
                       "of an eager call (the branch not taken is then pruned); or make the branches agree.")
    CUSTOM_GRADIENT = (423, UnimplementedError, "Node {node} ({op}): differentiating through a "
                            "tf.custom_gradient ({kind}), whose gradient is Python code in TensorFlow's registry, "
                            "not part of the graph, and could not be traced here (it is not in this process's "
                            "registry, as for a SavedModel loaded elsewhere, or it reads values the import cannot "
                            "give it): differentiating its forward ops instead would give another gradient, so "
                            "jax.grad refuses. The ways out: import the function in the process that defined it, or "
                            "take the gradient inside the tf.function with a tf.GradientTape and import that train "
                            "step (its gradient graph is TensorFlow's, the custom gradient included).")
    # Checks that may depend on run-time values: also recorded as data, so their codes are unique
    # across catalogues (``Message.by_code`` decodes them).
    LIST_ACCESS = (440, InvalidArgumentError, "Node {name} ({op}): Trying to access element {index} in a list with "
                        "{size} elements.", ("index", "size", "index_high"))
    LIST_MODIFY = (441, InvalidArgumentError, "Node {name} ({op}): Trying to modify element {index} in a list with "
                        "{size} elements.", ("index", "size", "index_high"))
    LIST_GATHER = (444, InvalidArgumentError, "Node {name} ({op}): Index {index} out o range; list only has {size} "
                        "elements.", ("index", "size", "index_high"))  # (TensorFlow's typo)
    LIST_POP_EMPTY = (442, InvalidArgumentError, "Node {name} ({op}): Trying to pop from an empty list.", ("size",))
    LIST_BEYOND_CAPACITY = (443, UnimplementedError, "Node {name} ({op}): a write at element {index} grows the list "
                                 "past the {capacity} elements it was sized for before its loop (jta's buffers have "
                                 "static sizes). The ways out: call the imported function through jta.checked "
                                 "(jta.checked(jax.jit(fn))), which learns the rows at run time and compiles again "
                                 "when they run out; give the loop a static bound (maximum_iterations= of "
                                 "tf.while_loop); or call the imported function eagerly.",
                                 ("index", "capacity", "index_high"))
    LIST_RESERVE_NEGATIVE = (445, InvalidArgumentError, "Node {name} ({op}): The num_elements to reserve must be a "
                                  "non negative number, but got {size}", ("size",))
    RANGE_UP = (447, InvalidArgumentError, "Node {name} ({op}): Requires start <= limit when delta > 0: "
                     "{start}/{limit}", ("start", "limit"))
    RANGE_DOWN = (448, InvalidArgumentError, "Node {name} ({op}): Requires start >= limit when delta < 0: "
                       "{start}/{limit}", ("start", "limit"))
    PARTITION_RANGE = (449, InvalidArgumentError, "Node {name} ({op}): partitions[{index}] = {value} is not in "
                            "[0, {count})", ("index", "value", "count"))
    STITCH_RANGE = (451, InvalidArgumentError, "Node {name} ({op}): indices[{index}] is out of range", ("index",))
    BINCOUNT_NEGATIVE = (450, InvalidArgumentError, "Node {name} ({op}): Input arr must be non-negative!", ())
    SEGMENT_NEGATIVE = (452, InvalidArgumentError, "Node {name} ({op}): segment ids must be >= 0", ())
    SEGMENT_ORDER = (453, InvalidArgumentError, "Node {name} ({op}): segment ids are not increasing", ())
    SEGMENT_RANGE = (454, InvalidArgumentError, "Node {name} ({op}): Segment id {value} out of range [0, {count}), "
                          "possibly because 'segment_ids' input is not sorted.", ("value", "count"))
    UNSORTED_SEGMENT_RANGE = (455, InvalidArgumentError, "Node {name} ({op}): segment_ids[{index}] = {value} is out "
                                   "of range [0, {count})", ("index", "value", "count"))
    GATHER_RANGE = (456, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = {value} is not in [0, {count})",
                         ("index", "value", "count"))
    GATHER_ND_RANGE = (457, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{vector}] does not index "
                            "into param shape [{shape}], node name: {name}", ("index", "first", "second"))
    SCATTER_ND_RANGE = (458, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{vector}] does not index "
                             "into shape [{shape}]", ("index", "first", "second"))
    SEQUENCE_NEGATIVE = (459, InvalidArgumentError, "Node {name} ({op}): seq_lens({index}) < 0", ("index",))
    SEQUENCE_LONG = (460, InvalidArgumentError, "Node {name} ({op}): seq_lens({index}) > input.dims({dim})", ("index",))
    GATHER_SCALAR_RANGE = (461, InvalidArgumentError, "Node {name} ({op}): indices = {value} is not in [0, {count})",
                                ("value", "count"))
    SLICE_BEGIN = (462, InvalidArgumentError, "Node {name} ({op}): Expected begin[{index}] in [0, {count}], but got "
                        "{value}", ("index", "count", "value"))
    SLICE_SIZE = (463, InvalidArgumentError, "Node {name} ({op}): Expected size[{index}] in [0, {count}], but got "
                       "{value}", ("index", "count", "value"))
    SHRUNK_INDEX = (464, InvalidArgumentError, "Node {name} ({op}): slice index {value} of dimension {index} out of "
                         "bounds.", ("value", "index"))
    NUMERICS_NAN = (467, InvalidArgumentError, "Node {name} ({op}): {message} : Tensor had NaN values", ())
    NUMERICS_INF = (468, InvalidArgumentError, "Node {name} ({op}): {message} : Tensor had Inf values", ())
    NUMERICS_BOTH = (469, InvalidArgumentError, "Node {name} ({op}): {message} : Tensor had Inf and NaN values", ())
    ASSERTION = (470, InvalidArgumentError, "Node {name} ({op}): assertion failed: {data}", ())
    DIVISION_BY_ZERO = (472, InvalidArgumentError, "Node {name} ({op}): Integer division by zero", ())
    NEGATIVE_POWER = (473, InvalidArgumentError, "Node {name} ({op}): Integers to negative integer powers are not "
                           "allowed", ())
    SCAN_AXIS = (474, InvalidArgumentError, "Node {name} ({op}): ScanOp: Expected scan axis in the range [{low}, "
                      "{high}), but got {axis}", ())
    LIST_SCATTER_NEGATIVE = (475, InvalidArgumentError, "Node {name} ({op}): Indices in TensorListScatter must all "
                                  "be non-negative.", ())
    LIST_SCATTER_RANGE = (476, InvalidArgumentError, "Node {name} ({op}): TensorListScatter: Trying to scatter at "
                               "index {index} in list with size {size}", ("index", "size"))
    LIST_SCATTER_GROWS = (478, UnimplementedError, "Node {name} ({op}): index {index} is past the list's {size} "
                               "elements, which TensorFlow grows to the largest index plus one: a length the data "
                               "decides, which jta.checked learns at run time (jta.checked(jax.jit(fn))).",
                          ("index", "size"))
    LIST_STACK_COUNT = (479, InvalidArgumentError, "Node {name} ({op}): Operation expected a list with {expected} "
                             "elements but got a list with {size} elements.", ("expected", "size"))
    NOT_INVERTIBLE = (480, InvalidArgumentError, "Node {name} ({op}): {what} is not invertible.", ())
    TF_UNIMPLEMENTED = (484, UnimplementedError, "Node {node} ({op}): {error}")  # (TF's text of an Unimplemented)
    RAGGED_SPLITS = (483, InvalidArgumentError, "Node {name} ({op}): Invalid row split size.", ())
    BOX_INDEX_RANGE = (482, OutOfRangeError, "Node {name} ({op}): box_index has values outside [0, batch_size)", ())
    POOL_BATCH = (481, UnimplementedError, "Node {name} ({op}): Pooling is not yet supported on the batch "
                                            "dimension.", ())
    LIST_RESIZE_NEGATIVE = (477, InvalidArgumentError, "Node {name} ({op}): TensorListSlice expects size to be "
                                 "non-negative. Got: {size}", ("size",))
    SHAPE_MISMATCH = (471, InvalidArgumentError, "Node {name} ({op}): Shape of tensor {tensor} [{shape}] is not "
                          "compatible with expected shape [{expected}].", ())
    LABEL_RANGE = (465, InvalidArgumentError, "Node {name} ({op}): Received a label value of {value} which is outside "
                        "the valid range of [0, {count}).  Label values: {values}", ("value", "first", "second"))
    LIST_FULL = (446, InvalidArgumentError, "Node {name} ({op}): Tried to push item into a full list list size: "
                      "{size} max_num_elements: {max}", ("size", "max"))  # (TensorFlow's "list list")
    UNIFORM_RANGE = (490, InvalidArgumentError, "Node {name} ({op}): Need minval < maxval, got {low} >= {high}",
                          ("low", "high"))
    STACK_OVERFLOW = (491, InvalidArgumentError, "Node {name} ({op}): Stack[{stack}] overflowed its max_size ({max})",
                           ("max",))  # (TensorFlow adds a per-process count to the stack's name)
    # the sparse kernels' checks (._ops_sparse) and InvertPermutation's at run time
    SPARSE_SEGMENT_INDEX = (620, InvalidArgumentError, "Node {name} ({op}): Bad: indices[{index}] == {value} out "
                                 "of range [0, {count})", ("index", "value", "count"))
    SPARSE_GRAD_INDEX = (621, InvalidArgumentError, "Node {name} ({op}): Index {value} out of range [0, {count}).",
                              ("value", "count"))
    SPARSE_GRAD_SEGMENT = (622, InvalidArgumentError, "Node {name} ({op}): Segment id {value} out of range [0, "
                                "{count}).", ("value", "count"))
    SPARSE_BOUNDS_1 = (623, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{first}] is out of "
                            "bounds: need 0 <= index < [{shape}]", ("index", "first"))
    SPARSE_BOUNDS_2 = (624, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{first},{second}] is out "
                            "of bounds: need 0 <= index < [{shape}]", ("index", "first", "second"))
    SPARSE_ORDER_1 = (625, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{first}] is out of order. "
                           "Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to create a "
                           "correctly ordered copy.\n\n", ("index", "first"))
    SPARSE_ORDER_2 = (626, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{first},{second}] is out "
                           "of order. Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to "
                           "create a correctly ordered copy.\n\n", ("index", "first", "second"))
    SPARSE_REPEAT_1 = (627, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{first}] is repeated",
                            ("index", "first"))
    SPARSE_REPEAT_2 = (628, InvalidArgumentError, "Node {name} ({op}): indices[{index}] = [{first},{second}] is "
                            "repeated", ("index", "first", "second"))
    SPARSE_MATMUL_INDEX = (629, InvalidArgumentError, "Node {name} ({op}): {letter} ({value}) from "
                                "index[{index},{column}] out of bounds (>={count})", ("value", "index", "count"))
    SPARSE_REDUCE_WRITE = (630, InternalError, "Node {name} ({op}): Obtained a write index of {value} which "
                                "is outside of bounds of [0, {count})", ("value", "count"))
    SPARSE_FILL_ROW = (631, InvalidArgumentError, "Node {name} ({op}): indices({index}, 0) is invalid: {value} >= "
                            "{count}", ("index", "value", "count"))
    SPARSE_FILL_GRAD = (632, InvalidArgumentError, "Node {name} ({op}): Elements in reverse index must be in [0, "
                             "{count}) but got {value}", ("value", "count"))
    SPARSE_DENSE_ADD_INDEX = (633, InvalidArgumentError, "Node {name} ({op}): Sparse tensor has an invalid index on "
                                   "dimension {dim}: a_indices({index},{dim}) = {value}, dense tensor shape: "
                                   "{shape}", ("index", "dim", "value"))
    PERMUTATION_RANGE = (634, InvalidArgumentError, "Node {name} ({op}): {value} is not between 0 and {count}",
                              ("value", "count"))
    PERMUTATION_REPEAT = (635, InvalidArgumentError, "Node {name} ({op}): {value} is duplicated in the input.",
                               ("value",))
