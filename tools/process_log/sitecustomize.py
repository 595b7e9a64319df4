"""Logs every Python process the test suite starts: copied into the environment's
site-packages (or with this folder on PYTHONPATH, which the README test clears for its
commands), with a file named in PROCESS_LOG, each process appends one line as it exits (a
process killed by a signal or ending in os._exit or MPI_Abort writes none):

    PID <tab> CPU seconds <tab> wall seconds <tab> imported torch (0/1) <tab> command <tab> test

the test being pytest's PYTEST_CURRENT_TEST, which the processes a test starts inherit.
``benchmarks/test_suite_processes.py`` sums the log up (docs/test-suite.md)::

    cp tools/process_log/sitecustomize.py .venv/lib/python3*/site-packages/
    PROCESS_LOG=/tmp/processes.tsv make test
    rm .venv/lib/python3*/site-packages/sitecustomize.py
"""

import os

if os.environ.get("PROCESS_LOG"):
    import atexit
    import resource
    import sys
    import time

    _started = time.monotonic()

    def _log() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        command = " ".join(sys.argv)[:300]
        test = os.environ.get("PYTEST_CURRENT_TEST", "-")
        line = "\t".join([str(os.getpid()), f"{usage.ru_utime + usage.ru_stime:.2f}",
                          f"{time.monotonic() - _started:.2f}", str(int("torch" in sys.modules)),
                          command.replace("\t", " "), test.replace("\t", " ")])
        with open(os.environ["PROCESS_LOG"], "a") as log:  # one write per line: no interleaving
            log.write(line + "\n")

    atexit.register(_log)
