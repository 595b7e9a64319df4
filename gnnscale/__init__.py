"""gnnscale: full-batch distributed training of graph neural networks (see README.md)."""

from .threads import size_kernel_pool as _size_kernel_pool

_size_kernel_pool()  # before numba is imported: see gnnscale/threads.py
