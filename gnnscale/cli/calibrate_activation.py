"""The time model's constants for dropout and the activation between layers
(``gnnscale tune --calibrate``), per value, cached and beyond the cache.

The engine's dropout hashes each element's index into its mask (:mod:`gnnscale.nn.dropout`):
a pass that computes more than it moves. Between two layers ReLU, the next layer's input
dropout and its transform run fused, a block of rows at a time
(:mod:`gnnscale.nn.fused_transform`); backward activates each block again, masks the gradient
and forms the products' gradients block by block. The jobs of a sweep on two cores of an AMD
EPYC host timed the dropout at 0.75-1.33 ns a value and the fused pass at 4.1-9.5 backward,
where an elementwise op (``gamma_elem``) took 0.30-0.48 (docs/planning.md, "Dropout and the
activation between layers"). Each is timed as the engine runs it (rows 16 wide, as a
hidden layer's), the fused pass with a bias and every gradient asked for, as in training;
its products are the next layer's dense terms in the model, so their flops at ``gamma_flop``
are taken off.
"""

from __future__ import annotations

import torch

#: the activation's width: a hidden layer's, that of the model's dense terms' checks
ACTIVATION_WIDTH = 16
#: the dropout probability timed (the mask's cost does not depend on it)
TIMED_DROPOUT = 0.5


def activation_constants(median_time, fit, values: list[int], suffix: str,
                         gamma_flop: float) -> dict:
    """``gamma_dropout``, ``gamma_activation`` and ``gamma_activation_back`` (seconds per
    value; ``suffix`` ``"_mem"`` for arrays beyond the cache) fitted through the origin over
    arrays of ``values`` values each, with the thread count already set.

    ``median_time(call, what=...)``: the call's median seconds
    (:func:`gnnscale.cli.calibrate._median_time`); ``fit(work, seconds)``: seconds per unit
    of work (``gnnscale.cli.calibrate._through_origin``; this module imports nothing of the
    calibration); ``gamma_flop``: seconds per flop of the dense products, taken off the fused
    pass's times."""
    from ..nn.dropout import dropout
    from ..nn.fused_transform import relu_dropout_linear

    width = ACTIVATION_WIDTH
    flops_per_row = 2.0 * width * width  # the fused pass's product (backward: two of them)
    sizes, dropout_s, forward_s, backward_s = [], [], [], []
    for n in values:
        rows = max(1, n // width)
        x = torch.empty(rows * width).uniform_(-1.0, 1.0)
        dropout_s.append(median_time(lambda: dropout(x, TIMED_DROPOUT), what=f"dropout{suffix}"))
        del x
        h = torch.empty(rows, width).uniform_(-1.0, 1.0).requires_grad_()
        weight = torch.empty(width, width).uniform_(-0.3, 0.3).requires_grad_()
        bias = torch.zeros(width, requires_grad=True)
        grad = torch.empty(rows, width).uniform_(-1.0, 1.0)

        def forward():
            return relu_dropout_linear(h, weight, TIMED_DROPOUT, True, bias)

        def both():
            h.grad = weight.grad = bias.grad = None
            forward().backward(grad)

        fwd = median_time(forward, what=f"activation{suffix}")
        total = median_time(both, what=f"activation backward{suffix}")
        sizes.append(rows * width)
        forward_s.append(max(0.0, fwd - gamma_flop * flops_per_row * rows))
        backward_s.append(max(0.0, total - fwd - gamma_flop * 2 * flops_per_row * rows))
        del h, weight, bias, grad
    return {f"gamma_dropout{suffix}": fit(sizes, dropout_s),
            f"gamma_activation{suffix}": fit(sizes, forward_s),
            f"gamma_activation_back{suffix}": fit(sizes, backward_s)}
