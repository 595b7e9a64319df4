"""tests/kernel_warmup.py, which `make test` runs first: its list names every cached kernel of
the packages and only those, its signatures read back as numba types, and a run compiles
into numba's cache and reports a signature that no longer compiles without failing."""

import os
import subprocess
import sys

from kernel_warmup import MANIFEST, cached_kernels, parse_signature, read_manifest, shares


def test_the_list_names_every_cached_kernel_and_only_those():
    listed = set(read_manifest())
    defined = {(module, name) for module, name, _ in cached_kernels()}
    assert listed <= defined, f"no such cached kernel: {sorted(listed - defined)}"
    assert defined <= listed, (f"not in {MANIFEST.name}: {sorted(defined - listed)} "
                               "(run `python tests/kernel_warmup.py --record` after make test)")


def test_signatures_read_back_as_they_were_written():
    for signatures in read_manifest().values():
        for text in signatures:
            assert repr(parse_signature(text)) == text


def test_shares_keep_each_kernel_whole_and_balance_signatures():
    kernels = {("m", "a"): ["1"] * 4, ("m", "b"): ["1"] * 2, ("m", "c"): ["1"] * 2,
               ("m", "d"): ["1"]}
    assert shares(kernels, 2) == [[("m", "a"), ("m", "d")], [("m", "b"), ("m", "c")]]
    assert shares(kernels, 9) == [[k] for k in sorted(kernels, key=lambda k: -len(kernels[k]))]


def test_a_run_fills_the_cache_and_reports_a_signature_that_no_longer_compiles(tmp_path):
    manifest = tmp_path / "signatures.txt"
    manifest.write_text("# a comment\npartitioning.edge_cut.rebalance _excess (float64, float64)\n"
                        "partitioning.edge_cut.rebalance _excess (float64,)\n")
    cache = tmp_path / "cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    script = MANIFEST.with_name("kernel_warmup.py")
    done = subprocess.run([sys.executable, str(script), "--manifest", str(manifest)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 kernel signatures compiled or loaded" in done.stdout, done.stdout
    assert "1 listed signatures no longer compile" in done.stdout, done.stdout
    assert "_excess(float64,)" in done.stdout, done.stdout
    assert list(cache.rglob("rebalance._excess-*.nbi")), sorted(cache.rglob("*"))

    missing = subprocess.run([sys.executable, str(script), "--manifest", str(tmp_path / "no")],
                             capture_output=True, text=True, env=env, timeout=60)
    assert missing.returncode == 2 and "no list of signatures" in missing.stderr
