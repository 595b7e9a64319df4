"""Model definitions for data-parallel CNN training (the GNN layers live in gnnscale.nn)."""

from .resnet import BasicBlock, ResNet, count_parameters, resnet_small, resnet_small_fc

__all__ = ["BasicBlock", "ResNet", "count_parameters", "resnet_small", "resnet_small_fc"]
