"""gnnscale's Adam and AdamW: bit for bit torch's, state dicts interchangeable with torch's,
torch's own step for options it does not run itself, and no torch._dynamo import."""

import subprocess
import sys

import pytest
import torch

from gnnscale.engine.adam import Adam, AdamW


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))


def _groups(model: torch.nn.Module, split: bool):
    if not split:
        return model.parameters()
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return [{"params": weights}, {"params": biases, "weight_decay": 0.0, "lr": 0.05}]


def _train(model, optimizer, steps: int, start: int = 0) -> None:
    for step in range(start, start + steps):
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(11, 7, generator=generator)
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        if step % 5 == 3:  # a parameter without a gradient this step is left alone
            model[2].bias.grad = None
        optimizer.step()


def _assert_same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (name, x), y in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(x, y), name


CASES = [(Adam, torch.optim.Adam, {"lr": 0.01, "weight_decay": 5e-4}),
         (Adam, torch.optim.Adam, {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6}),
         (AdamW, torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1}),
         (AdamW, torch.optim.AdamW, {})]


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("ours, theirs, options", CASES)
def test_parameters_equal_torch_bit_for_bit(ours, theirs, options, split):
    mine, reference = _model(0), _model(0)
    _train(mine, ours(_groups(mine, split), **options), 40)
    _train(reference, theirs(_groups(reference, split), **options), 40)
    _assert_same(mine, reference)


@pytest.mark.parametrize("ours, theirs, options", CASES[:1] + CASES[2:3])
def test_state_dicts_move_between_torch_and_gnnscale(ours, theirs, options):
    reference = _model(1)
    reference_opt = theirs(reference.parameters(), **options)
    _train(reference, reference_opt, 30)

    mine = _model(1)
    mine_opt = ours(mine.parameters(), **options)
    _train(mine, mine_opt, 10)
    back = _model(2)  # torch resumes from gnnscale's state dict, gnnscale from torch's
    back.load_state_dict(mine.state_dict())
    back_opt = theirs(back.parameters(), **options)
    back_opt.load_state_dict(mine_opt.state_dict())
    _train(back, back_opt, 10, start=10)
    again = _model(3)
    again.load_state_dict(back.state_dict())
    again_opt = ours(again.parameters(), **options)
    again_opt.load_state_dict(back_opt.state_dict())
    _train(again, again_opt, 10, start=20)
    _assert_same(again, reference)
    assert isinstance(again_opt, theirs)


def test_closure_and_an_option_torch_runs_itself():
    mine, reference = _model(4), _model(4)
    opt = Adam(mine.parameters(), lr=0.01, amsgrad=True)  # goes to torch's step
    ref = torch.optim.Adam(reference.parameters(), lr=0.01, amsgrad=True)
    _train(mine, opt, 12)
    _train(reference, ref, 12)
    _assert_same(mine, reference)

    x = torch.ones(2, 7)
    plain = Adam(mine.parameters(), lr=0.01)

    def closure():
        plain.zero_grad()
        loss = mine(x).sum()
        loss.backward()
        return loss

    before = mine[0].weight.clone()
    assert plain.step(closure) is not None
    assert not torch.equal(before, mine[0].weight)


def test_a_sparse_gradient_is_refused():
    weight = torch.nn.Parameter(torch.ones(3, 2))
    weight.grad = torch.ones(3, 2).to_sparse()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        Adam([weight]).step()


def test_building_and_stepping_imports_no_compiler():
    script = (
        "import sys, torch\n"
        "from gnnscale.engine.adam import Adam, AdamW\n"
        "for cls in (Adam, AdamW):\n"
        "    model = torch.nn.Linear(4, 2)\n"
        "    opt = cls(model.parameters(), lr=0.1, weight_decay=0.01)\n"
        "    model(torch.ones(3, 4)).sum().backward()\n"
        "    opt.step(); opt.zero_grad(); opt.load_state_dict(opt.state_dict())\n"
        "print('torch._dynamo' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False", done.stderr
