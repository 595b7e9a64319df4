"""benchmarks/step_breakdown.py's timers and its means over the middle of the steps."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from step_breakdown import Timers, middle_means, rotating  # noqa: E402


def test_middle_means_drop_the_stalled_steps_and_keep_the_parts_adding_up():
    steps = [10.0] * 18 + [1.0, 100.0]  # one step too fast, one a stalled host
    samples = {"step": steps, "post": [s * 0.1 for s in steps],
               "rest": [s * 0.9 for s in steps]}
    means = middle_means(samples)
    assert means["step"] == 10.0
    assert abs(means["post"] + means["rest"] - means["step"]) < 1e-12


def test_a_kernels_progress_tests_are_timed_apart_from_it():
    timers = Timers()

    def product(block, dense, progress=None, add_to=None):
        for _ in range(3):
            progress()
        return dense

    calls = []
    wrapped = timers.wrap_kernel(product)
    assert wrapped(None, "rows", lambda: calls.append(1)) == "rows"
    assert len(calls) == 3
    assert 0 < timers.seconds["tests"] <= timers.seconds["products"]
    timers.clear()
    assert not timers.seconds


def test_each_round_takes_every_item_once_starting_one_further_on():
    assert rotating(["a", "b", "c"], 4) == ["a", "b", "c", "b", "c", "a", "c", "a", "b",
                                            "a", "b", "c"]
