"""Plain-numpy twins of acl26.kernels.ternary (stumpy-style): slow, obvious, and the oracle, split as the
kernels are (quantize, pack, matmul).

They follow the module docstring's definitions directly (group codes from the weights themselves,
not from the kernel's tables) and add float32 numbers in the order it specifies, so the kernels
must match them bit for bit.
"""

from naive.ternary.matmul import gemm, gemv  # noqa: F401
from naive.ternary.pack import (GROUP, _first_nonzero_sign, _groups, decode_index, group_codes, pack,  # noqa: F401
                                pack_i2, pack_sherry, pack_tl2, unpack, unpack_i2, unpack_sherry, unpack_tl2)
from naive.ternary.quantize import absmean_ternarize, sparse_split, sparse_ternarize  # noqa: F401
