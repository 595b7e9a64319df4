"""The model names of :class:`~gnnscale.nn.GNN` (``gnnscale train --model``), without torch:
the command line offers them as choices before anything heavy loads."""

MODEL_NAMES = ("gcn", "sage", "sage-max", "gat", "gin", "gatv2", "graphconv")
