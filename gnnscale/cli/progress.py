"""Console progress: a live bar only where someone watches a terminal, plain lines elsewhere.

Cluster jobs write their output to files and launchers forward it through pipes; a bar there
is thousands of ``\\r``-separated frames glued to the lines around it. So the bar is drawn only
on rank 0 when its stderr is a terminal; otherwise (files, pipes, ``mpirun`` forwarding) the
commands print their periodic lines and nothing else.
"""

from __future__ import annotations

import sys

from ..comm import env_rank


def live_bar_wanted(no_progress: bool = False, stream=None) -> bool:
    """True on rank 0 when ``stream`` (default stderr) is a terminal and no one said no."""
    stream = stream if stream is not None else sys.stderr
    try:
        is_terminal = stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        is_terminal = False
    return not no_progress and env_rank() == 0 and is_terminal


def progress_bar(total: int, desc: str, unit: str = "it", no_progress: bool = False,
                 initial: int = 0, **options):
    """A tqdm bar on stderr, disabled (drawing nothing) unless :func:`live_bar_wanted`;
    ``options`` go to tqdm (e.g. ``unit_scale``)."""
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr,
                disable=not live_bar_wanted(no_progress), dynamic_ncols=True, leave=False,
                **options)


def print_line(bar, line: str) -> None:
    """Print ``line`` on stdout, above the bar when one is drawn."""
    if bar.disable:
        print(line, flush=True)
    else:
        bar.write(line)
