"""Graph datasets: the :class:`GraphData` container, loaders for real formats, and generators.

``load_dataset(name_or_path)`` reads Planetoid raw pickles, heterophilous-graphs npz files,
SNAP edge lists, OGB node-property folders (CSV or ``ogb``'s binary ``raw/data.npz`` layout),
PyG-style npz files (``edge_index``, ``x``, ``y``, masks) and scipy sparse npz files, or
generates a stochastic block model (``sbm``), R-MAT (``rmat``) or degree-corrected
stochastic block model (``dcsbm``) graph. PyG and DGL objects
convert with ``GraphData.from_pyg``/``to_pyg`` and :func:`from_dgl`/:func:`to_dgl`.
:func:`download_dataset` fetches a public dataset named in :data:`REGISTRY` into a data root.
"""

from gnnscale.data.dcsbm import generate_dcsbm
from gnnscale.data.dgl_io import from_dgl, to_dgl
from gnnscale.data.download import download_dataset
from gnnscale.data.graph_data import GraphData
from gnnscale.data.load import DATASET_NAMES, detect_format, load_dataset, load_path
from gnnscale.data.registry import REGISTRY
from gnnscale.data.rmat import generate_rmat
from gnnscale.data.sbm import generate_sbm
from gnnscale.data.scipy_io import save_scipy

__all__ = ["GraphData", "load_dataset", "load_path", "detect_format", "generate_sbm",
           "generate_rmat", "generate_dcsbm", "DATASET_NAMES", "from_dgl", "to_dgl", "save_scipy",
           "download_dataset", "REGISTRY"]
