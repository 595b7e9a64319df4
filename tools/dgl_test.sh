#!/usr/bin/env bash
# tests/dgl_env in the DGL environment: `make dgl-test`, and `make test` beside the main suite.
# Usage: tools/dgl_test.sh DGL_ENV PIN_FILE PYTHON  (run from the checkout)
# Builds the environment if needed (tools/dgl_env.sh). A failing DGL test fails (exit 1). An
# environment that cannot be built (no route to PyPI, no disk) is not a test failure: one SKIP
# line says why and the exit is 0, unless DGL_ENV_REQUIRED is set (then it fails).
# Numba's cache for these runs goes to build/numba-dgl: this environment's numba is older than
# .venv's, and both writing the kernels' cache next to the sources would each discard the other's.
set -u
env_dir=$1 pins=$2 python=$3
if bash tools/dgl_env.sh "$env_dir" "$pins" "$python"; then
    PYTHONPATH=$PWD PATH="$env_dir/bin:$PATH" OMP_NUM_THREADS=1 NUMBA_CACHE_DIR=$PWD/build/numba-dgl \
        "$env_dir/bin/python" -m pytest -q -p no:cacheprovider tests/dgl_env
else
    echo "SKIP DGL tests: the DGL environment $env_dir could not be built" \
        "($(grep -m 1 '^ERROR' "$env_dir.log" 2>/dev/null || tail -n 1 "$env_dir.log" 2>/dev/null))"
    test -z "${DGL_ENV_REQUIRED:-}"
fi
