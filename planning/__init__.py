"""Models of the engine's time and memory, before anything runs.

NumPy only (no torch, no MPI, never ``gnnscale``); reads graphs and partitions through
:mod:`partitioning`:

* :mod:`planning.workload`: what each part of a partition computes and exchanges.
* :mod:`planning.cost_model`: the epoch-time model (alpha-beta exchanges, compute constants);
  :mod:`planning.halo_wire`: the halo dtype and staleness policy it takes;
  :mod:`planning.shared_cores`: the step's timeline of ranks sharing a host's cores.
* :mod:`planning.memory_plan`: peak resident memory per rank and phase (``gnnscale plan``).
* :mod:`planning.tune`: sweep partitioners x part counts and recommend one (``gnnscale tune``);
  :mod:`planning.placement`: one rank per host, per socket or per core as a choice.
"""
