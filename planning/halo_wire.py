"""What a halo exchange puts on the wire, and when: the halo dtype and the staleness policy as
choices of the time model.

* **Halo dtype** (``train --halo-dtype``): bytes of one row of ``w`` values on the wire,
  :func:`row_bytes`: float32 ``4 w``, bfloat16 ``2 w``, int8/int4/int2 ``ceil(w b / 8) + 8``
  (the codes packed ``8 / b`` to a byte plus a float32 scale and offset per row, as
  ``gnnscale/graph/quantize.py`` sends them; halo gradients travel at the rows' width). A
  rank encodes the rows it sends and decodes the rows it receives: ``encode`` and ``decode``
  elementwise ops per value (:data:`DEFAULT_CODING`, measured on this host by
  ``benchmarks/projection.py wire`` against the ``gamma_elem`` op; float32 costs nothing).
* **Staleness** (``train --staleness``), :class:`Staleness`: ``exact`` waits for every
  exchange; ``pipelined[:GAMMA]`` uses what was sent the step before, so no pass waits and the
  exchanges of a step travel while the step computes (the step lasts at least as long as its
  exchanges take to travel); ``delayed:R`` also waits for nothing and sends ``1 / R`` of the
  rows each step (bucket ``t mod R``); ``local`` sends nothing after the first step (the rows
  are still gathered and the boundary products still computed, as the engine does).
  Evaluation always exchanges exactly. The first, synchronous step of a stale policy is not
  modelled: the model is of a step in steady state.

Numpy-free and torch-free: the same grammar as ``gnnscale.graph.staleness.make_policy``,
checked here so that ``gnnscale tune`` refuses what the planner cannot model in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from partitioning.errors import PartitionError

__all__ = ["HALO_DTYPES", "QUANTIZED_BITS", "META_BYTES", "DEFAULT_CODING", "row_bytes",
           "Staleness", "HaloOptions"]

HALO_DTYPES = ("float32", "bfloat16", "int8", "int4", "int2")
QUANTIZED_BITS = {"int8": 8, "int4": 4, "int2": 2}
#: float32 scale and offset per quantized row (gnnscale.graph.quantize.META_BYTES)
META_BYTES = 8
#: (encode, decode) elementwise-op equivalents per value, one thread, rows of 64 values
#: beyond the cache: ``benchmarks/projection.py wire`` on this host
#: (benchmarks/results/projection_stats.json, ``wire``)
DEFAULT_CODING = {"float32": (0.0, 0.0), "bfloat16": (2.3, 2.7), "int8": (5.8, 6.1),
                  "int4": (11.9, 6.5), "int2": (5.2, 6.0)}
STALENESS_POLICIES = ("exact", "pipelined", "delayed", "local")


def check_halo_dtype(dtype: str) -> str:
    """``dtype`` if the model knows it, else one line naming it (PartitionError)."""
    if dtype not in HALO_DTYPES:
        raise PartitionError(f"unknown halo dtype {dtype!r}; the time model knows "
                             f"{', '.join(HALO_DTYPES)}")
    return dtype


def row_bytes(dtype: str, width: float, bytes_per_value: int = 4) -> float:
    """Bytes on the wire of one row of ``width`` values sent as ``dtype`` (float32:
    ``bytes_per_value`` per value)."""
    check_halo_dtype(dtype)
    if dtype == "float32":
        return width * bytes_per_value
    if dtype == "bfloat16":
        return width * 2
    return math.ceil(width * QUANTIZED_BITS[dtype] / 8) + META_BYTES


@dataclass(frozen=True)
class Staleness:
    """A staleness policy as the time model sees it: ``name`` and, for ``delayed``, the
    ``rounds`` R (``gamma``: pipelined's smoothing, which costs no time)."""

    name: str = "exact"
    rounds: int = 1
    gamma: float = 0.0

    @classmethod
    def parse(cls, text: str) -> "Staleness":
        """``exact``, ``pipelined``, ``pipelined:GAMMA`` (0 <= GAMMA < 1), ``delayed:R``
        (R >= 1), ``local``; anything else: PartitionError, one line."""
        spec = str(text).strip().lower()
        name, _, arg = spec.partition(":")
        try:
            if name in ("exact", "local") and not arg:
                return cls(name)
            if name == "pipelined":
                gamma = float(arg) if arg else 0.0
                if 0.0 <= gamma < 1.0:
                    return cls(name, gamma=gamma)
            if name == "delayed" and arg and int(arg) >= 1:
                return cls(name, rounds=int(arg))
        except ValueError:
            pass
        raise PartitionError(f"unknown staleness {text!r}; the time model knows exact, "
                             f"pipelined, pipelined:GAMMA (0 <= GAMMA < 1), delayed:R (R >= 1) "
                             f"and local")

    @property
    def spec(self) -> str:
        """The ``--staleness`` text of this policy."""
        if self.name == "delayed":
            return f"delayed:{self.rounds}"
        if self.name == "pipelined" and self.gamma:
            return f"pipelined:{self.gamma:g}"
        return self.name

    @property
    def waits(self) -> bool:
        """Whether a training pass waits for its exchange (only ``exact``)."""
        return self.name == "exact"

    @property
    def wire_fraction(self) -> float:
        """The fraction of an exchange's rows sent in each training step."""
        return {"local": 0.0, "delayed": 1.0 / self.rounds}.get(self.name, 1.0)


@dataclass(frozen=True)
class HaloOptions:
    """How halos travel: ``dtype`` (:data:`HALO_DTYPES`), ``staleness`` (a
    :class:`Staleness` or its text) and ``coding`` (dtype -> (encode, decode) elementwise
    ops per value; default :data:`DEFAULT_CODING`)."""

    dtype: str = "float32"
    staleness: Staleness | str = "exact"
    coding: dict = field(default_factory=lambda: dict(DEFAULT_CODING))

    def __post_init__(self):
        check_halo_dtype(self.dtype)
        if not isinstance(self.staleness, Staleness):
            object.__setattr__(self, "staleness", Staleness.parse(self.staleness))
        if self.dtype not in self.coding:
            raise PartitionError(f"halo dtype {self.dtype!r} has no coding cost "
                                 f"(known: {', '.join(sorted(self.coding))})")
        encode, decode = self.coding[self.dtype]
        if not (encode >= 0 and decode >= 0) or math.inf in (encode, decode):
            raise PartitionError(f"coding cost of {self.dtype} must be finite and >= 0, got "
                                 f"{encode}, {decode}")

    def row_bytes(self, width: float, bytes_per_value: int = 4) -> float:
        """Bytes of one ``width``-wide row on the wire (:func:`row_bytes`)."""
        return row_bytes(self.dtype, width, bytes_per_value)

    @property
    def label(self) -> str:
        """``dtype/staleness``, e.g. ``int8/pipelined``."""
        return f"{self.dtype}/{self.staleness.spec}"
