#!/usr/bin/env bash
# Build the DGL environment once: tools/dgl_env.sh ENV PIN_FILE PYTHON
#
# ENV (a path outside the repository, named with a hash of PIN_FILE, see the Makefile) ends up
# as a symlink to a sibling folder ENV.build-XXXXXX that holds the virtual environment. The
# folder is built in place (a venv cannot be renamed after the fact: its scripts name their
# interpreter by absolute path), gets a stamp file .installed only after every package
# installed and imported, and only then does the symlink appear, by an atomic rename. So ENV
# is either absent or complete: an interrupted build leaves an orphan ENV.build-* folder that
# the next run deletes and redoes. A lock (flock on ENV.lock) lets concurrent `make test`s
# (other checkouts on this machine) wait for one build instead of racing.
# Exit status 0: ENV is ready. Non-zero: it could not be built (the pip log is ENV.log).
set -euo pipefail
env=$1 pin=$2 python=$3

[ -f "$env/.installed" ] && exit 0
mkdir -p "$(dirname "$env")"
exec 9>"$env.lock"
flock 9
[ -f "$env/.installed" ] && exit 0  # built by another run while this one waited

# Nothing valid is here, and we hold the lock: clear what interrupted builds left.
rm -rf "$env" "$env".build-*
log="$env.log"
: >"$log"
build=$(mktemp -d "$env.build-XXXXXX")
trap 'rm -rf "$build"' EXIT  # a failed build frees its disk now (a killed one: on the next run)
echo "dgl-env: building $env (torch 2.2.1 CUDA build from PyPI + DGL 2.1.0, about 5 GB;" \
     "pip log: $log)"
start=$(date +%s)
"$python" -m venv "$build" >>"$log" 2>&1
"$build/bin/python" -m pip install --no-input --progress-bar off --upgrade pip >>"$log" 2>&1
"$build/bin/python" -m pip install --no-input --progress-bar off -r "$pin" >>"$log" 2>&1
# A wheel that installs but cannot load (a DGL library for another torch, numpy 2 ABI) fails here.
"$build/bin/python" - >>"$log" 2>&1 <<'PY'
import dgl, mpi4py, numba, numpy, pymetis, scipy, torch, torch_geometric
print("dgl-env check:", "dgl", dgl.__version__, "torch", torch.__version__, "numpy",
      numpy.__version__, "pyg", torch_geometric.__version__)
dgl.graph(([0, 1], [1, 2]))
PY
touch "$build/.installed"
ln -s "$(basename "$build")" "$build.link"
mv -T "$build.link" "$env"
trap - EXIT
echo "dgl-env: ready at $env after $(( $(date +%s) - start )) s"
