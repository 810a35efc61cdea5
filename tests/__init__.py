"""jta's test suite (a package, so helpers import as ``tests.helpers`` and ``tests.oracle``)."""
