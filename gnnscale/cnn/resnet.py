"""Small residual networks for data-parallel CNN training and its benchmarks.

He et al., "Deep Residual Learning for Image Recognition" (CVPR 2016): stacks of basic blocks
``y = relu(x' + F(x))`` with ``F = conv3x3 -> BN -> relu -> conv3x3 -> BN`` and ``x'`` the input
(or a strided 1x1 conv + BN where the shape changes). torchvision cannot be installed here, so the
models are defined from scratch; only ``torch.nn`` is used.

Two heads share one body:

- ``head="linear"``: global average pooling and one linear layer (the usual ResNet head);
- ``head="fc"``: a VGG-like fully connected head (Simonyan & Zisserman, 2015): the feature map is
  pooled to ``fc_pool x fc_pool``, flattened, and passed through two hidden ``Linear -> relu ->
  Dropout`` layers. It adds tens of millions of parameters whose gradients are ready first in
  backward, the case where overlapping the allreduce with the rest of backward matters most.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


def make_norm(kind: str, channels: int) -> nn.Module:
    """``"batch"``: BatchNorm2d; ``"group"``: GroupNorm (per-sample, so data-parallel results
    equal one process on the whole batch); ``"none"``: identity."""
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "group":
        return nn.GroupNorm(min(8, channels), channels)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown norm {kind!r}; choose 'batch', 'group' or 'none'")


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with normalisation and an identity (or 1x1 projection) shortcut.

    Args:
        in_channels, out_channels: channel counts; ``stride`` (default 1) of the first conv;
        ``norm``: see :func:`make_norm` (default ``"batch"``).
    Shapes: ``[N, in_channels, H, W] -> [N, out_channels, H / stride, W / stride]``.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1,
                 norm: str = "batch"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = make_norm(norm, out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = make_norm(norm, out_channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                make_norm(norm, out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """A ResNet of basic blocks for ``image_size``-pixel images.

    Args:
        widths: channels of each stage (default ``(32, 64, 128, 256)``); every stage after the
            first halves the resolution.
        blocks: basic blocks per stage (default one each).
        num_classes: output classes (default 10).
        image_size: input height = width (default 32, CIFAR). At 64 or more the stem is a
            strided 7x7 conv followed by max pooling, as for ImageNet.
        head: ``"linear"`` (average pool + linear) or ``"fc"`` (VGG-like, see the module doc).
        fc_hidden: widths of the FC head's hidden layers (default ``(4096, 4096)``).
        fc_pool: the FC head pools the last feature map to ``fc_pool x fc_pool`` (default 2).
        dropout: dropout probability in the FC head (default 0: deterministic, for tests).
        norm: ``"batch"`` (default), ``"group"`` or ``"none"`` (see :func:`make_norm`).
    Shapes: ``[N, 3, image_size, image_size] -> [N, num_classes]``.
    """

    def __init__(self, widths: Sequence[int] = (32, 64, 128, 256),
                 blocks: Sequence[int] = (1, 1, 1, 1), num_classes: int = 10,
                 image_size: int = 32, head: str = "linear",
                 fc_hidden: Sequence[int] = (4096, 4096), fc_pool: int = 2,
                 dropout: float = 0.0, norm: str = "batch"):
        super().__init__()
        if len(widths) != len(blocks) or not widths:
            raise ValueError(f"widths {tuple(widths)} and blocks {tuple(blocks)} must be "
                             f"non-empty and of the same length (one entry per stage)")
        if head not in ("linear", "fc"):
            raise ValueError(f"unknown head {head!r}; choose 'linear' or 'fc'")
        if image_size >= 64:  # ImageNet stem: /4 before the first stage
            self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
                                      make_norm(norm, widths[0]), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False),
                                      make_norm(norm, widths[0]), nn.ReLU(inplace=True))
        stages, in_channels = [], widths[0]
        for index, (width, count) in enumerate(zip(widths, blocks)):
            layers = []
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                layers.append(BasicBlock(in_channels, width, stride, norm))
                in_channels = width
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        if head == "linear":
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                      nn.Linear(in_channels, num_classes))
        else:
            layers = [nn.AdaptiveAvgPool2d(fc_pool), nn.Flatten()]
            features = in_channels * fc_pool * fc_pool
            for hidden in fc_hidden:
                layers += [nn.Linear(features, hidden), nn.ReLU(inplace=True), nn.Dropout(dropout)]
                features = hidden
            layers.append(nn.Linear(features, num_classes))
            self.head = nn.Sequential(*layers)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)))


def resnet_small(num_classes: int = 10, image_size: int = 32, **kwargs) -> ResNet:
    """The ~1.2M-parameter ResNet of the benchmarks (widths 32-256, one block per stage)."""
    return ResNet(num_classes=num_classes, image_size=image_size, **kwargs)


def resnet_small_fc(num_classes: int = 10, image_size: int = 32, **kwargs) -> ResNet:
    """:func:`resnet_small`'s body with the VGG-like FC head (~22M parameters, ~88 MB of grads)."""
    return ResNet(num_classes=num_classes, image_size=image_size, head="fc", **kwargs)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars in ``module``."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
