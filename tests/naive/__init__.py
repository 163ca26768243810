"""Plain-numpy reference twins of the Numba kernels, one module per module of ``kernels/``
(stumpy's ``tests/naive.py`` is the model): same function names, slow, obvious, and the oracle.
tests/test_twins.py checks that every public kernel function has a twin that a test compares it with."""
