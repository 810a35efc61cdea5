"""jta: TensorFlow's TensorArray and its gradient machinery as pure, jit-compiled JAX."""

from importlib import metadata as _metadata

from . import _serialization, errors, gradients, raw_ops  # noqa: F401  (_serialization: jax.export of jta's pytrees)
from ._delivery.api import ErrorRecord, checked, checkify, throw
from ._describe import describe
from .graph_import import import_function, import_graph_def, import_saved_model
from .loops import fori_loop, while_loop
from .tensor_array import TensorArray

__all__ = ["ErrorRecord", "TensorArray", "checked", "checkify", "describe", "errors", "fori_loop", "gradients", "import_function", "import_graph_def",
           "import_saved_model", "raw_ops",
           "throw", "while_loop"]
try:
    __version__ = _metadata.version("jta")  # defined once, in pyproject.toml
except _metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"
