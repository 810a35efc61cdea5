"""Every op of the table that takes an integer argument, fed valid and bad values, against TensorFlow:
the same value, or the same exception class and text, eagerly and under ``jta.checked``
(``tests/helpers/opfuzz``). A refusal (``UnimplementedError``: a value that must be known while
tracing) and a value TensorFlow rejects while tracing are not compared.

The fuzzer found the silent values of integer division by zero, negative powers, scan axes, TensorList
scatters and resizes, and the wrong classes of static arguments. What it still finds is listed in
:data:`KNOWN`, by cell, with the reason; a listed cell that now agrees with TensorFlow fails the test
(take it off the list). By default every 32nd spec runs (7 of 208); ``--long`` runs them all (about
a minute and a half of test time).
"""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tests.helpers import budget  # noqa: E402
from tests.helpers.opfuzz import run_spec  # noqa: E402
from tests.helpers.opfuzz.known import KNOWN  # noqa: E402
from tests.helpers.opfuzz.specs import SPECS  # noqa: E402

# Cells where TensorFlow aborts the process (a CHECK failure or a segfault): nothing to compare with.
TF_ABORTS = frozenset({
    "Conv2DBackpropInput.sizes#4", "TensorArraySplitV3.lengths#3", "TensorArraySplitV3.lengths#c3",
    "TensorListScatterIntoExistingList.indices#3", "TensorListScatterIntoExistingList.indices#c3",
    *(f"MaxPoolGradWithArgmax.argmax#{c}" for c in ("2", "3", "4", "c2", "c3", "c4")),
})

# Cells where TensorFlow's kernel reads past its input (no check): its value differs from run to run.
TF_UNDEFINED = frozenset({"RaggedTensorToTensor.splits#3", "RaggedTensorToTensor.splits#c3"})

AGREE = {"SAME", "REFUSED", "TF_TRACE"}



def _specs() -> list:
    return SPECS if budget.LONG else SPECS[::32]


@pytest.mark.long
@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_op_agrees_with_tensorflow_on_bad_integers(spec) -> None:
    wrong, fixed = [], []
    for cell, eager, checked, detail in run_spec(spec, tf, TF_ABORTS | TF_UNDEFINED):
        agrees = eager in AGREE and checked in AGREE
        if cell in KNOWN and agrees:
            fixed.append(cell)
        elif cell not in KNOWN and not agrees:
            wrong.append(f"{cell}: eager {eager}, checked {checked}: {detail}")
    assert not wrong, "\n".join(wrong)
    assert not fixed, f"listed in KNOWN but agree with TensorFlow now: {fixed}"
