"""Compile the package's cached numba kernels once, before the suite starts.

Every kernel is compiled on first use with ``cache=True``: the first process that calls it
for a signature compiles it and writes it to numba's cache, later processes load it. From a
fresh clone the cache is empty, and the suite's first minutes start dozens of processes at
once (two test workers, every ``mpirun`` rank), each compiling the same kernels for itself
until one of them has written the cache. ``make test`` runs this first: it compiles every
signature listed in ``tests/kernel_signatures.txt`` in a few processes, one kernel per task
(two processes writing one kernel's cache index could lose each other's entries), so the
suite's processes find them all cached. Where the cache is current it only loads them.

The list records what the suite compiles::

    python tests/kernel_warmup.py --record   # after a full `make test`: rewrite the list

A listed signature that no longer compiles (a kernel changed its arguments) is reported
in one line and skipped; the suite then compiles that kernel itself, as without the warm-up.
"""

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = Path(__file__).with_name("kernel_signatures.txt")
PACKAGES = ("gnnscale", "partitioning", "planning")


def read_manifest(path: Path = MANIFEST) -> dict[tuple[str, str], list[str]]:
    """``(module, function) -> [signature, ...]`` from the list (``#`` starts a comment; a
    signature ``-`` names a kernel that only other kernels call, compiled with them)."""
    kernels: dict[tuple[str, str], list[str]] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            module, function, signature = line.split(" ", 2)
        except ValueError:
            raise SystemExit(f"kernel_warmup: {path.name} line {number} is not "
                             f"'module function signature': {line!r}")
        kernels.setdefault((module, function), [])
        if signature != "-":
            kernels[(module, function)].append(signature)
    return kernels


def parse_signature(text: str):
    """A signature as numba prints it, e.g. ``(Array(int64, 1, 'C', False, aligned=True),
    int64)``, back into numba types."""
    from numba.core import types

    class _Literal:
        def __getitem__(self, _kind):
            return types.literal

    names = {name: value for name, value in vars(types).items() if not name.startswith("_")}
    names.update(bool=types.boolean, int=int, Literal=_Literal())
    signature = eval(text, {"__builtins__": {}}, names)  # noqa: S307 - our own list
    return signature if isinstance(signature, tuple) else (signature,)


def _compile_kernel(module: str, function: str, signatures: list[str]) -> tuple[int, list[str]]:
    name = f"{module}.{function}"
    try:
        dispatcher = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as error:
        return 0, [f"{name}: {error}"]
    done, failed = 0, []
    for text in signatures:
        try:
            dispatcher.compile(parse_signature(text))
            done += 1
        except Exception as error:  # numba's typing errors have no common base worth naming
            failed.append(f"{name}{text}: {type(error).__name__}: {error}".splitlines()[0])
    return done, failed


def shares(kernels: dict[tuple[str, str], list[str]], jobs: int) -> list[list[tuple[str, str]]]:
    """The kernels split into ``jobs`` lists with about as many signatures each; a kernel is
    never split (two processes writing one kernel's cache index could lose entries)."""
    lists: list[list[tuple[str, str]]] = [[] for _ in range(max(1, jobs))]
    sizes = [0] * len(lists)
    for kernel in sorted(kernels, key=lambda k: (-len(kernels[k]), k)):
        smallest = sizes.index(min(sizes))
        lists[smallest].append(kernel)
        sizes[smallest] += len(kernels[kernel])
    return [share for share in lists if share]


def warm(manifest: Path, jobs: int) -> tuple[int, list[str]]:
    """Compile (or load from the cache) every signature the list names, in ``jobs``
    processes of their own (each a plain interpreter: ``--share``); the number compiled and
    one line per signature that failed."""
    children = []
    kernels = {kernel: signatures for kernel, signatures in read_manifest(manifest).items()
               if signatures}
    for share in shares(kernels, jobs):
        argv = [sys.executable, __file__, "--manifest", str(manifest), "--share",
                ",".join(f"{module}:{function}" for module, function in share)]
        children.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=REPO))
    compiled, failed = 0, []
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            failed.append(f"a warm-up process exited with {child.returncode}")
            continue
        result = json.loads(out.strip().splitlines()[-1])
        compiled += result["compiled"]
        failed += result["failed"]
    return compiled, failed


def cached_kernels():
    """Every numba dispatcher with ``cache=True`` defined in the repository's packages."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    for package in PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError:  # an optional dependency (e.g. torch_geometric) is missing
                continue
            for name, value in vars(module).items():
                if (isinstance(value, Dispatcher) and value.__module__ == info.name
                        and not isinstance(value._cache, NullCache)):
                    yield info.name, name, value


def record(path: Path = MANIFEST) -> int:
    """Rewrite the list from the signatures numba's cache holds now (current sources only)."""
    lines = []
    for module, name, dispatcher in cached_kernels():
        index = dispatcher._cache._cache_file._load_index()  # numba's own freshness check
        lines += sorted(f"{module} {name} {key[0]}" for key in index) or [f"{module} {name} -"]
    header = ("# What tests/kernel_warmup.py compiles before the suite: module, kernel, signature\n"
              "# ('-': compiled only inside the kernels that call it). Written by\n"
              "# `python tests/kernel_warmup.py --record` after a full `make test`.\n")
    path.write_text(header + "\n".join(lines) + "\n")
    return sum(not line.endswith(" -") for line in lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true",
                        help="rewrite tests/kernel_signatures.txt from numba's cache")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="processes that compile (default: one per core)")
    parser.add_argument("--manifest", type=Path, default=MANIFEST,
                        help="the list of signatures (default: %(default)s)")
    parser.add_argument("--share", help=argparse.SUPPRESS)  # one process's kernels
    args = parser.parse_args(argv)
    if args.share is not None:
        kernels = read_manifest(args.manifest)
        compiled, failed = 0, []
        for kernel in args.share.split(","):
            module, function = kernel.split(":")
            done, errors = _compile_kernel(module, function, kernels[(module, function)])
            compiled += done
            failed += errors
        print(json.dumps({"compiled": compiled, "failed": failed}))
        return 0
    if args.record:
        print(f"kernel_warmup: recorded {record(args.manifest)} signatures in {args.manifest}")
        return 0
    if not args.manifest.is_file():
        print(f"kernel_warmup: no list of signatures {str(args.manifest)!r}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    compiled, failed = warm(args.manifest, args.jobs)
    print(f"kernel warm-up: {compiled} kernel signatures compiled or loaded in "
          f"{time.perf_counter() - start:.0f} s")
    if failed:
        print(f"kernel warm-up: {len(failed)} listed signatures no longer compile and were "
              f"skipped (run `python tests/kernel_warmup.py --record` after a full make test): "
              + "; ".join(failed[:3]) + (" ..." if len(failed) > 3 else ""))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
