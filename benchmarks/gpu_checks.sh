#!/usr/bin/env bash
# gnnscale's checks on one GPU: the CUDA tests, a CLI training run on the GPU, and the engine
# benchmark (gnnscale against PyG on the same GPU) on R-MAT 18 with dropout 0.5 and 0, and GCN
# on R-MAT 21. Every part has its own time limit and writes its own file, so one failing part
# leaves the others' results.
#
#     bash benchmarks/gpu_checks.sh OUT_DIR
#
# from the repository root, with a python whose torch is a CUDA build (PYTHON, default
# python3) and torch_geometric installed. OUT_DIR receives gpu.txt (nvidia-smi), cuda_tests.txt
# (pytest), cli_cuda.txt (`gnnscale train --device cuda` on Cora), bench.txt (the benchmarks'
# log) and engine_vs_pyg_cuda{,_dropout0,_rmat21}.json (benchmarks/engine_vs_dgl.py reports).
set -u
out=${1:?usage: bash benchmarks/gpu_checks.sh OUT_DIR}
py=${PYTHON:-python3}
threads=${THREADS:-8}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
started=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - started )) s)"; }

stamp "gpu"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv \
    | tee "$out/gpu.txt"
"$py" -c "import torch, torch_geometric, numpy; print('torch', torch.__version__, \
'cuda', torch.version.cuda, 'pyg', torch_geometric.__version__, 'numpy', numpy.__version__)" \
    | tee -a "$out/gpu.txt"

stamp "cuda tests"
timeout 240 "$py" -m pytest -q -p no:cacheprovider -rs \
    tests/graph/test_cuda_paths.py tests/comm/test_comm_cuda.py 2>&1 | tee "$out/cuda_tests.txt"

stamp "cli on cuda"
timeout 120 "$py" -m gnnscale train --dataset cora --model gcn --epochs 100 --device cuda \
    2>&1 | tail -n 20 | tee "$out/cli_cuda.txt"

variants="gnnscale gnnscale_bf16 pyg_edge_index pyg_csr pyg_edge_index_bf16 pyg_csr_bf16"
for dropout in 0.5 0; do
    stamp "R-MAT 18, dropout $dropout"
    suffix=$([ "$dropout" = 0 ] && echo _dropout0)
    timeout 200 "$py" benchmarks/engine_vs_dgl.py --device cuda --threads "$threads" \
        --variants $variants --dropout "$dropout" --warmup 3 --reps 20 --replace \
        --out "$out/engine_vs_pyg_cuda$suffix.json" 2>&1 | tee -a "$out/bench.txt"
done

stamp "R-MAT 21, gcn"
timeout 240 "$py" benchmarks/engine_vs_dgl.py --device cuda --threads "$threads" --scale 21 \
    --features 100 --classes 47 --models gcn --variants gnnscale gnnscale_bf16 pyg_csr \
    --warmup 2 --reps 10 --replace --out "$out/engine_vs_pyg_cuda_rmat21.json" \
    2>&1 | tee -a "$out/bench.txt"
stamp "done"
