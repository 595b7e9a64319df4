"""Float32 CPU matrix products through oneDNN where torch's BLAS leaves the cores half used.

torch multiplies float32 CPU matrices with its BLAS, MKL in the x86 wheels. MKL chooses its
kernels by processor vendor: on AMD processors it runs 256-bit AVX2 code even where the
cores execute AVX-512 at full width (Zen 5: two 512-bit FMA pipes per core). oneDNN, which
the same wheels carry for torch's bf16 and convolution paths, chooses by the instruction sets
the processor reports. On an AMD EPYC (Zen 5) the engine's products run faster through oneDNN
(``python benchmarks/gemm_backends.py``; docs/performance.md, "Dense products", has the
figures). The sums run in another order than MKL's, so results agree to float32 rounding,
not bit for bit.

``GNNSCALE_GEMM`` chooses (read at the first product, or by :func:`uses_onednn`, which the
trainer calls when it is built, so a bad value stops a run before it starts):

- ``auto`` (default): oneDNN on x86 processors other than Intel's, where torch has oneDNN,
  for products of at least :data:`MIN_ONEDNN_MACS` multiply-adds (below that its per-call
  set-up outweighs the gain); torch's own product otherwise (on Intel processors
  MKL takes its AVX-512 path).
- ``onednn``: oneDNN wherever torch has it (same size rule).
- ``torch``: torch's product always.

Only float32 CPU tensors outside autograd's recording go through oneDNN (its operator here
has no backward); everything else goes to torch unchanged.
"""

from __future__ import annotations

import functools
import os
import platform

import torch

from ..errors import UsageError

#: multiply-adds below which a product goes to torch (oneDNN's per-call set-up dominates;
#: docs/performance.md, "Dense products")
MIN_ONEDNN_MACS = 2**20

BACKENDS = ("auto", "onednn", "torch")


def cpu_info(field: str) -> str:
    """The first processor's ``field`` in ``/proc/cpuinfo`` (``vendor_id``, ``model name``),
    or ``""`` where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                if name.strip() == field:
                    return value.strip()
    except OSError:
        pass
    return ""


def _cpu_vendor() -> str:
    """The x86 vendor string (``GenuineIntel``, ``AuthenticAMD``, ...), or ``""``."""
    return cpu_info("vendor_id")


@functools.cache
def _onednn_linear():
    """torch's oneDNN linear operator, or None where this build of torch has none (looked up
    once: every product asks)."""
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


def _choose(setting: str) -> bool:
    """Whether products go through oneDNN under ``GNNSCALE_GEMM=setting``."""
    if setting not in BACKENDS:
        raise UsageError(f"GNNSCALE_GEMM must be one of {', '.join(BACKENDS)}, got "
                         f"{setting!r}")
    if setting == "torch" or _onednn_linear() is None:
        return False
    if setting == "onednn":
        return True
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")
    return x86 and _cpu_vendor() not in ("", "GenuineIntel")


_use_onednn: bool | None = None  # decided at the first product


def uses_onednn() -> bool:
    """Whether large float32 CPU products go through oneDNN (``GNNSCALE_GEMM``, read once);
    raises :class:`~gnnscale.errors.UsageError` for a value not in :data:`BACKENDS`."""
    global _use_onednn
    if _use_onednn is None:
        _use_onednn = _choose(os.environ.get("GNNSCALE_GEMM", "auto").strip().lower()
                              or "auto")
    return _use_onednn


def set_backend(setting: str | None) -> bool:
    """Choose as ``GNNSCALE_GEMM=setting`` would (None: read the variable again at the next
    product); returns whether oneDNN is used now (for None, False until then)."""
    global _use_onednn
    _use_onednn = None if setting is None else _choose(setting)
    return bool(_use_onednn)


def cpu_autocast_dtype() -> torch.dtype | None:
    """The dtype CPU autocast runs in where it is on, else None."""
    try:
        enabled, dtype = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
    except TypeError:  # torch < 2.4
        enabled, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
    return dtype if enabled else None


def _onednn_takes(a: torch.Tensor, b: torch.Tensor) -> bool:
    if not uses_onednn():
        return False
    if a.dtype != torch.float32 or b.dtype != torch.float32 or a.dim() != 2 or b.dim() != 2:
        return False
    if a.device.type != "cpu" or b.device.type != "cpu":
        return False
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return False
    return a.shape[0] * a.shape[1] * b.shape[1] >= MIN_ONEDNN_MACS


def mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None,
       scratch: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` (``[M, K] x [K, N]``; either may be a transposed or sliced view), written
    into ``out`` where given. ``scratch``: an ``[M, N]`` tensor torch's product writes into
    rather than allocating (oneDNN returns a tensor of its own; read the returned one)."""
    if not _onednn_takes(a, b):
        target = out if out is not None else scratch
        return torch.mm(a, b) if target is None else torch.mm(a, b, out=target)
    product = _onednn_linear()(a, b.t(), None, "none", [], "")
    return product if out is None else out.copy_(product)


#: rows per block of :func:`mm_tn`'s reduction (both operands' blocks, transposed for
#: oneDNN, stay in the core's cache)
TALL_BLOCK_ROWS = 2048


def mm_tn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a^T @ b`` for tall ``a`` ``[N, P]`` and ``b`` ``[N, Q]`` -> ``[P, Q]`` (a weight's
    gradient). oneDNN's operator reduces over its operands' contiguous dimension, so each
    operand is transposed into a buffer first: here that happens a block of
    :data:`TALL_BLOCK_ROWS` rows at a time, summing the blocks' products, never for the
    whole of ``a`` or ``b``."""
    if not _onednn_takes(a.t(), b):
        return torch.mm(a.t(), b)
    out = None
    for lo in range(0, a.shape[0], TALL_BLOCK_ROWS):
        a_rows, b_rows = a[lo:lo + TALL_BLOCK_ROWS], b[lo:lo + TALL_BLOCK_ROWS]
        out = mm(a_rows.t(), b_rows) if out is None else addmm(out, a_rows.t(), b_rows)
    return out


def addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``c + a @ b`` as a new tensor (``c`` ``[M, N]`` is left as it is): for a small ``c``
    (a weight's gradient summed over blocks); :func:`addmm_` adds into a large one."""
    if not _onednn_takes(a, b) or not c.is_contiguous() or c.dtype != torch.float32:
        return torch.addmm(c, a, b)
    return _onednn_linear().binary(a, c, b.t(), None, "add")


#: output rows per oneDNN call of :func:`addmm_`
ADD_BLOCK_ROWS = 4096


def addmm_(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``c += a @ b`` in place, returning ``c``. oneDNN's accumulating product returns a new
    tensor, so there it runs :data:`ADD_BLOCK_ROWS` rows at a time, each block's sum copied
    into ``c`` while in cache: no ``[M, N]`` temporary."""
    if not _onednn_takes(a, b) or not c.is_contiguous() or c.dtype != torch.float32:
        return c.addmm_(a, b)
    linear = _onednn_linear()
    for lo in range(0, c.shape[0], ADD_BLOCK_ROWS):
        rows = c[lo:lo + ADD_BLOCK_ROWS]
        rows.copy_(linear.binary(a[lo:lo + ADD_BLOCK_ROWS], rows, b.t(), None, "add"))
    return c
