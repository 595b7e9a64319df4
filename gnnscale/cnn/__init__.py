"""Convolutional networks (ResNets) for data-parallel CNN training (the GNN layers live in
gnnscale.nn)."""

from .resnet import (BasicBlock, ResNet, count_parameters, make_norm, resnet_small,
                     resnet_small_fc)

__all__ = ["BasicBlock", "ResNet", "count_parameters", "make_norm", "resnet_small",
           "resnet_small_fc"]
