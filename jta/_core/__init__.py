"""The storage and kernel core: a TensorArray as a pytree and TensorFlow's kernels on it.

Bottom first (each module imports only those above it in this list and the record format,
``jta._records``):

* ``shapes``: partial shapes and dtype names, printed as TensorFlow prints them.
* ``inputs``: user inputs made canonical (dtypes, static integers, indices, values).
* ``memory``: how much a buffer may take; refused before allocating.
* ``buffer``: pure functions on one dense ``[capacity, *element_shape]`` buffer.
* ``array``: the data structure (leaves, static metadata ``ArrayMeta``, the two storage forms).
* ``storage``: element access in either form, after the kernels' checks.
* ``kernels``: one function per TensorFlow kernel, checking inputs in the kernel's order.
* ``accumulators``: gradient accumulators (``TensorArrayGradOp``).

The core never imports the delivery layer (``jta._delivery``), nor the public modules.
"""
