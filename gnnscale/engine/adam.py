"""torch's Adam and AdamW, without importing ``torch._dynamo`` on the first call.

``torch.optim.Optimizer`` wraps ``add_param_group``, ``zero_grad``, ``state_dict`` and
``load_state_dict`` in ``torch._disable_dynamo``, and ``Adam.step`` in a wrapper that imports
``torch._dynamo``; the first of these calls imports the compiler stack (sympy, the decompositions,
the FX passes): about 1.5 s of CPU in every process that builds an optimizer, that is, in every
rank of every run, for a compiler the engine never uses (docs/performance.md, "Start-up").

These classes are ``torch.optim.Adam`` and ``torch.optim.AdamW`` (subclasses: schedulers, hooks,
``isinstance`` and the checkpoints' state dicts work unchanged) whose four wrapped methods call the
function torch wrapped, and whose ``step`` runs torch's single-tensor update, operation for
operation, where torch itself would run it: every parameter on the CPU and none of amsgrad,
maximize, capturable, differentiable, foreach or fused asked for. Anything else (a GPU parameter,
where torch runs its multi-tensor kernels) goes to torch's own ``step``. tests/engine/test_adam.py
holds the parameters bit for bit equal to torch's over many steps.
"""

from __future__ import annotations

import torch

_TORCH_ONLY_OPTIONS = ("amsgrad", "maximize", "capturable", "differentiable", "foreach", "fused")


def _unwrapped(method):
    """The function ``torch._disable_dynamo`` wrapped (the method itself in a torch without that
    wrapper)."""
    return getattr(method, "__wrapped__", method)


_add_param_group = _unwrapped(torch.optim.Optimizer.add_param_group)
_zero_grad = _unwrapped(torch.optim.Optimizer.zero_grad)
_state_dict = _unwrapped(torch.optim.Optimizer.state_dict)
_load_state_dict = _unwrapped(torch.optim.Optimizer.load_state_dict)


class _StartsWithoutCompiler:
    """The methods that replace torch's wrapped ones; mixed into Adam and AdamW below."""

    def add_param_group(self, param_group: dict) -> None:
        _add_param_group(self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _zero_grad(self, set_to_none)

    def state_dict(self) -> dict:
        return _state_dict(self)

    def load_state_dict(self, state_dict: dict) -> None:
        _load_state_dict(self, state_dict)

    def step(self, closure=None):
        """One update of every parameter with a gradient; ``closure`` as in torch."""
        if not self._single_tensor_on_cpu():
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with torch.no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _single_tensor_on_cpu(self) -> bool:
        return all(not any(group.get(name) for name in _TORCH_ONLY_OPTIONS)
                   and not torch.is_tensor(group["lr"])
                   and all(p.device.type == "cpu" and not p.is_complex()
                           for p in group["params"])
                   for group in self.param_groups)

    def _update_group(self, group: dict) -> None:
        # torch.optim.adam._single_tensor_adam's operations, in its order
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        decoupled = group.get("decoupled_weight_decay",
                              isinstance(self, torch.optim.AdamW))
        for param in group["params"]:
            if param.grad is None:
                continue
            if param.grad.is_sparse:
                raise RuntimeError("Adam does not support sparse gradients")
            grad = param.grad
            state = self.state[param]
            if not state:
                state["step"] = torch.tensor(0.0, dtype=torch.get_default_dtype())
                state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(param,
                                                       memory_format=torch.preserve_format)
            exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
            step_t += 1
            if weight_decay != 0:
                if decoupled:
                    param.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(param, alpha=weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = step_t.item()
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)


class Adam(_StartsWithoutCompiler, torch.optim.Adam):
    """``torch.optim.Adam`` (same arguments, same results) that starts without the compiler."""


class AdamW(_StartsWithoutCompiler, torch.optim.AdamW):
    """``torch.optim.AdamW`` (same arguments, same results) that starts without the
    compiler."""
