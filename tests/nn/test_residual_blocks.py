"""Platonov et al.'s residual blocks (gnnscale.nn.residual_blocks) on 2 and 4 ranks equal one
process on the whole graph (losses of 4 Adam steps and the eval-mode logits, within 5e-5 of the
values' scale), for GCN, SAGE and GAT blocks with layer norm, batch norm and no norm, on a
directed graph with isolated nodes, self-loops and repeated edges. (Their own DGL model is the
reference in tests/dgl_env/test_dglenv_residual.py.)"""

import sys
from pathlib import Path

import pytest
import torch

from residual_driver import CASES, PARTITIONER_BY_SIZE, case_data, run_cases

from gnnscale.comm import init
from gnnscale.nn import ResidualGNN

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from exactness_cases import relative_error, saved_by_size  # noqa: E402

DRIVER = Path(__file__).with_name("residual_driver.py")
TOLERANCE = 5e-5
saved = saved_by_size(DRIVER, tuple(PARTITIONER_BY_SIZE))  # 2 and 4 ranks, one launch


@pytest.fixture(scope="module")
def one_process():
    return run_cases(init("single"), "random")


@pytest.mark.parametrize("nprocs", tuple(PARTITIONER_BY_SIZE))
def test_residual_blocks_distributed_equal_one_process(nprocs, one_process, saved):
    saved = saved[nprocs]
    failures = []
    for case in CASES:
        for part in ("losses", "logits"):
            err = relative_error(saved[f"{case}/{part}"], one_process[f"{case}/{part}"])
            if not err <= TOLERANCE:
                failures.append(f"{case} {part}: relative error {err:.2e}")
    assert not failures, "\n".join(failures)


def test_single_logit_is_bce_and_binary_output_has_two_columns():
    data = case_data(2)
    torch.manual_seed(0)
    model = ResidualGNN("sage", data.num_features, 8, 2, num_layers=1, dropout=0.0)
    assert model.output_linear.out_features == 1
    z = torch.randn(5)
    two = torch.stack([torch.zeros(5), z], dim=1)
    y = torch.tensor([0, 1, 1, 0, 1])
    ce = torch.nn.functional.cross_entropy(two, y)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(z, y.float())
    assert torch.allclose(ce, bce, atol=1e-6)
    assert ResidualGNN("sage", 4, 8, 3).output_linear.out_features == 3


@pytest.mark.parametrize("kwargs,match", [(dict(block="gin"), "unknown residual block"),
                                          (dict(num_layers=0), "num_layers"),
                                          (dict(dropout=1.0), "dropout"),
                                          (dict(block="gat", hidden_dim=10), "multiple")])
def test_bad_arguments_name_the_value(kwargs, match):
    args = {**dict(block="gcn", in_dim=4, hidden_dim=16, out_dim=2), **kwargs}
    with pytest.raises(ValueError, match=match):
        ResidualGNN(**args)
