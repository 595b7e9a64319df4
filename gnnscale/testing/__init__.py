"""Tools for trying gnnscale where the real thing is not at hand: :mod:`.cluster`, several hosts
on one machine. Standard library only; nothing here imports the rest of gnnscale."""
