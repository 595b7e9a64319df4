"""gnnscale's ResidualGNN equals Platonov et al.'s own DGL model (heterophilous-graphs).

``platonov_reference`` below is their ``modules.py``/``model.py`` (yandex-research/
heterophilous-graphs, MIT licence, Copyright (c) 2023-present Yandex Research) reduced to the
GCN, SAGE and GAT modules, unchanged otherwise. With the same weights (their parameter names are
gnnscale's), dropout 0, their graph set-up (bidirected, self-loops added for GCN and GAT) and
their binary loss (BCE on one logit), a few AdamW steps give the same losses and logits.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from gnnscale.comm import init
from gnnscale.data import generate_sbm, to_dgl
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.nn import ResidualGNN

STEPS, LR, HIDDEN, LAYERS, HEADS = 4, 1e-3, 32, 2, 4


def platonov_reference():
    """Their classes (GCN, SAGE, GAT modules), as in their repository."""
    from dgl import ops
    from dgl.nn.functional import edge_softmax

    class ResidualModuleWrapper(nn.Module):
        def __init__(self, module, normalization, dim, **kwargs):
            super().__init__()
            self.normalization = normalization(dim)
            self.module = module(dim=dim, **kwargs)

        def forward(self, graph, x):
            x_res = self.normalization(x)
            x_res = self.module(graph, x_res)
            return x + x_res

    class FeedForwardModule(nn.Module):
        def __init__(self, dim, hidden_dim_multiplier, dropout, input_dim_multiplier=1,
                     **kwargs):
            super().__init__()
            input_dim = int(dim * input_dim_multiplier)
            hidden_dim = int(dim * hidden_dim_multiplier)
            self.linear_1 = nn.Linear(in_features=input_dim, out_features=hidden_dim)
            self.dropout_1 = nn.Dropout(p=dropout)
            self.act = nn.GELU()
            self.linear_2 = nn.Linear(in_features=hidden_dim, out_features=dim)
            self.dropout_2 = nn.Dropout(p=dropout)

        def forward(self, graph, x):
            x = self.linear_1(x)
            x = self.dropout_1(x)
            x = self.act(x)
            x = self.linear_2(x)
            return self.dropout_2(x)

    class GCNModule(nn.Module):
        def __init__(self, dim, hidden_dim_multiplier, dropout, **kwargs):
            super().__init__()
            self.feed_forward_module = FeedForwardModule(
                dim=dim, hidden_dim_multiplier=hidden_dim_multiplier, dropout=dropout)

        def forward(self, graph, x):
            degrees = graph.out_degrees().float()
            degree_edge_products = ops.u_mul_v(graph, degrees, degrees)
            norm_coefs = 1 / degree_edge_products ** 0.5
            x = ops.u_mul_e_sum(graph, x, norm_coefs)
            return self.feed_forward_module(graph, x)

    class SAGEModule(nn.Module):
        def __init__(self, dim, hidden_dim_multiplier, dropout, **kwargs):
            super().__init__()
            self.feed_forward_module = FeedForwardModule(
                dim=dim, input_dim_multiplier=2, hidden_dim_multiplier=hidden_dim_multiplier,
                dropout=dropout)

        def forward(self, graph, x):
            message = ops.copy_u_mean(graph, x)
            x = torch.cat([x, message], axis=1)
            return self.feed_forward_module(graph, x)

    class GATModule(nn.Module):
        def __init__(self, dim, hidden_dim_multiplier, num_heads, dropout, **kwargs):
            super().__init__()
            self.dim = dim
            self.num_heads = num_heads
            self.head_dim = dim // num_heads
            self.input_linear = nn.Linear(in_features=dim, out_features=dim)
            self.attn_linear_u = nn.Linear(in_features=dim, out_features=num_heads)
            self.attn_linear_v = nn.Linear(in_features=dim, out_features=num_heads,
                                           bias=False)
            self.attn_act = nn.LeakyReLU(negative_slope=0.2)
            self.feed_forward_module = FeedForwardModule(
                dim=dim, hidden_dim_multiplier=hidden_dim_multiplier, dropout=dropout)

        def forward(self, graph, x):
            x = self.input_linear(x)
            attn_scores_u = self.attn_linear_u(x)
            attn_scores_v = self.attn_linear_v(x)
            attn_scores = ops.u_add_v(graph, attn_scores_u, attn_scores_v)
            attn_scores = self.attn_act(attn_scores)
            attn_probs = edge_softmax(graph, attn_scores)
            x = x.reshape(-1, self.head_dim, self.num_heads)
            x = ops.u_mul_e_sum(graph, x, attn_probs)
            x = x.reshape(-1, self.dim)
            return self.feed_forward_module(graph, x)

    modules = {"gcn": GCNModule, "sage": SAGEModule, "gat": GATModule}

    class Model(nn.Module):
        def __init__(self, model_name, num_layers, input_dim, hidden_dim, output_dim,
                     hidden_dim_multiplier, num_heads, normalization, dropout):
            super().__init__()
            self.input_linear = nn.Linear(in_features=input_dim, out_features=hidden_dim)
            self.dropout = nn.Dropout(p=dropout)
            self.act = nn.GELU()
            self.residual_modules = nn.ModuleList()
            for _ in range(num_layers):
                self.residual_modules.append(ResidualModuleWrapper(
                    module=modules[model_name], normalization=normalization, dim=hidden_dim,
                    hidden_dim_multiplier=hidden_dim_multiplier, num_heads=num_heads,
                    dropout=dropout))
            self.output_normalization = normalization(hidden_dim)
            self.output_linear = nn.Linear(in_features=hidden_dim, out_features=output_dim)

        def forward(self, graph, x):
            x = self.input_linear(x)
            x = self.dropout(x)
            x = self.act(x)
            for residual_module in self.residual_modules:
                x = residual_module(graph, x)
            x = self.output_normalization(x)
            return self.output_linear(x).squeeze(1)

    return Model


@pytest.mark.parametrize("block", ["gcn", "sage", "gat"])
def test_residual_gnn_equals_their_dgl_model(block):
    import dgl

    data = generate_sbm(num_nodes=200, num_classes=2, avg_degree=6.0, num_features=12,
                        train_per_class=30, num_val=40, num_test=60, seed=3)
    graph = dgl.to_bidirected(to_dgl(data))  # their Dataset
    if block in ("gcn", "gat"):
        graph = dgl.add_self_loop(graph)
    torch.manual_seed(0)
    ours = ResidualGNN(block, data.num_features, HIDDEN, 2, num_layers=LAYERS, dropout=0.0,
                       num_heads=HEADS)
    theirs = platonov_reference()(block, LAYERS, data.num_features, HIDDEN, 1, 1.0, HEADS,
                                  nn.LayerNorm, 0.0)
    theirs.load_state_dict(ours.state_dict())  # same names, same shapes

    comm = init("single")
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    trainer = Trainer(ours, problem, comm, lr=LR, weight_decay=0.0)
    trainer.optimizer = torch.optim.AdamW(ours.parameters(), lr=LR, weight_decay=0.0)
    optimizer = torch.optim.AdamW(theirs.parameters(), lr=LR, weight_decay=0.0)
    x = torch.from_numpy(data.x)
    y = torch.from_numpy(data.y).float()
    train = torch.from_numpy(data.train_mask)
    ours_losses, their_losses = [], []
    for _ in range(STEPS):
        ours_losses.append(trainer.train_step()[0])
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(theirs(graph, x)[train], y[train])
        loss.backward()
        optimizer.step()
        their_losses.append(float(loss))
    np.testing.assert_allclose(ours_losses, their_losses, rtol=1e-5)
    theirs.eval()
    with torch.no_grad():
        their_logit = theirs(graph, x).numpy()
    ours_logits = trainer.predict().numpy()
    assert np.all(ours_logits[:, 0] == 0.0)
    np.testing.assert_allclose(ours_logits[:, 1], their_logit, rtol=1e-4, atol=1e-5)
