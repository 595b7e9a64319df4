"""``tune --calibrate`` on an unsteady host: every measurement is repeated, and where the
repeats spread by more than a stated bound too often, one warning line says the figures are
unreliable, naming the worst spread; the time model's noise rate is that spread, measured.
Measurements are injected: a fake clock, a fake ``mpirun`` result."""

import json
import subprocess

import numpy as np
import pytest

from gnnscale.cli import calibrate as cal

pytestmark = pytest.mark.timeout(300)


def test_steady_repeats_give_no_warning():
    steadiness = cal.Steadiness()
    for index in range(8):
        steadiness.add(f"m{index}", [1.0, 1.1, 1.2, 1.05, 1.0])
    steadiness.add("one page fault", [1.0, 1.0, 9.0, 1.0, 1.0])  # a few may spread
    assert steadiness.warning() is None


def test_unsteady_repeats_give_one_line_with_the_spread():
    steadiness = cal.Steadiness()
    steadiness.where = "at 2 thread(s)"
    for index in range(3):
        steadiness.add(f"m{index}", [1.0, 1.1, 1.0])
    steadiness.add("gather", [1.0, 3.0, 1.5])
    steadiness.add("aggregation", [0.2, 1.0, 0.5])
    line = steadiness.warning()
    assert line is not None and "\n" not in line
    assert "2 of 5 measurements differ by more than 2x" in line, line
    assert "worst 5.0x: aggregation at 2 thread(s)" in line, line
    assert "unreliable" in line


class FakeClock:
    """Each timed call lasts the next of ``durations`` (cycled): the clock advances by it
    between a measurement's two readings."""

    def __init__(self, durations):
        self.durations, self.calls, self.now = list(durations), 0, 0.0

    def __call__(self):
        reading = self.now
        if self.calls % 2 == 0:
            self.now += self.durations[(self.calls // 2) % len(self.durations)]
        self.calls += 1
        return reading


def fake_alltoallv(small_times):
    """A fake 2-rank mpirun of the alltoallv timings: the smallest message's repeats as
    given, the others steady."""
    rows = [{"bytes": b, "peers": 1, "seconds": float(sorted(t)[len(t) // 2]), "times": t}
            for b, t in ((8, small_times), (1024, [2e-5] * 15), (4 << 20, [1e-3] * 15))]

    def run(cmd, **kwargs):
        assert "--alltoallv" in cmd and cmd[-1].endswith("constants.json")
        result = {"rows": rows, "exchange_overhead_s": 2e-4}
        return subprocess.CompletedProcess(cmd, 0, json.dumps(result) + "\n", "")
    return run


@pytest.mark.parametrize("host", ["steady", "busy"])
def test_calibrate_warns_on_a_busy_host_only(host, monkeypatch):
    durations = [1e-3] if host == "steady" else [1e-3, 4e-3, 1e-3, 1e-3, 6e-3]
    monkeypatch.setattr(cal, "clock", FakeClock(durations))
    small = [1e-5] * 15 if host == "steady" else [2e-5, 8.6e-4, 3e-5] * 5
    monkeypatch.setattr(cal.subprocess, "run", fake_alltoallv(small))
    monkeypatch.setattr(cal, "MAX_WORKING_SET", 16 << 20)  # the smallest beyond-cache size
    said = []
    costs = cal.calibrate(max_threads=1, scale=0.02, say=said.append)
    warnings = [line for line in said if line.startswith("warning")]
    if host == "steady":
        assert warnings == [], said
        # the cache each core has to itself is recorded and said beside the knee
        assert costs.private_cache_bytes == cal.private_cache_bytes()
        cache_line = next(line for line in said if line.startswith("calibrated the cache"))
        own = costs.private_cache_bytes
        assert (f"at most {own / 2**10:.0f} KiB, each core's own" in cache_line) == (own > 0)
        return
    assert len(warnings) == 1, said
    assert "worst 43.0x: shared-memory alltoallv of 8 B" in warnings[0], warnings[0]
    assert cal._steadiness is None  # nothing keeps recording after the calibration


@pytest.mark.parametrize("durations,calls", [([1e-3], 6), ([0.2], 4), ([0.2, 1e-3], 6)])
def test_long_calls_are_repeated_three_times_short_ones_five(durations, calls, monkeypatch):
    """One untimed call, then 5 timed ones, or 3 where each timed one took 0.1 s or more."""
    monkeypatch.setattr(cal, "clock", FakeClock(durations))
    made = []
    assert cal._median_time(lambda: made.append(1)) == pytest.approx(
        sorted((durations * 5)[:calls - 1])[(calls - 1) // 2])
    assert len(made) == calls


def test_interleaved_measurements_take_turns_and_give_each_its_median(monkeypatch):
    """The aggregation's widths are timed in turns (one untimed call each, then rounds of one
    timed call each), so a drifting host slows every width alike; each gets its own median."""
    monkeypatch.setattr(cal, "clock", FakeClock([1e-3]))
    calls = []
    medians = cal._interleaved_median_times([lambda: calls.append("a"),
                                             lambda: calls.append("b")], repeats=3)
    assert calls == ["a", "b"] * 4
    assert medians == [pytest.approx(1e-3)] * 2


def test_the_alltoallv_ranks_import_this_gnnscale_from_any_working_directory(tmp_path,
                                                                             monkeypatch):
    """A real 2-rank mpirun started from a folder holding another ``gnnscale`` (a checkout
    beside the installed one): its ranks still run this package and its compiled kernels."""
    impostor = tmp_path / "gnnscale"
    impostor.mkdir()
    (impostor / "__init__.py").write_text("raise ImportError('not this gnnscale')\n")
    monkeypatch.chdir(tmp_path)
    fitted = cal.shared_memory_constants(timeout=120)
    assert fitted["shm_alpha"] > 0 and fitted["shm_beta"] >= 0, fitted


def test_the_cache_knee_is_measured_on_a_ladder_of_working_sets(monkeypatch):
    import planning.cache_knee as knee

    measured, real_fit = [], knee.fit_cache_knee

    def fit(sizes, rates):
        measured.append((list(sizes), list(rates)))
        return real_fit(sizes, rates)

    monkeypatch.setattr(knee, "fit_cache_knee", fit)
    slow = cal.measure_cache_knee(16 << 20, beyond_rate=1e-6)  # far slower beyond: a knee
    (sizes, rates), = measured
    ladder = [cal.KNEE_SMALLEST << k for k in range(6) if cal.KNEE_SMALLEST << k <= 4 << 20]
    assert sizes == ladder + [16 << 20] and rates[-1] == 1e-6 and len(ladder) >= 3
    assert all(0 < r < 1e-7 for r in rates[:-1])  # seconds per edge value, measured
    assert cal.KNEE_SMALLEST // 2 <= slow < (16 << 20)
    assert cal.measure_cache_knee(16 << 20, beyond_rate=1e-15) == 16 << 20  # no knee in range


def test_the_noise_rate_is_the_spread_of_consecutive_runs_squared_over_their_time():
    # runs of 10 ms +- 1 ms alternating: consecutive runs differ by 2 ms, so the spread is
    # sqrt(pi) / 2 * 2 ms and the rate its square over 10 ms
    times = [9e-3, 11e-3] * 10
    assert cal.spread_rate(times) == pytest.approx(np.pi * 1e-6 / 1e-2)
    # a steady drift hardly counts: 10 ms growing by 10 us a run
    assert cal.spread_rate([1e-2 + 1e-5 * i for i in range(20)]) < 1e-7
    assert cal.spread_rate([1e-2]) == 0.0 == cal.spread_rate([5e-3] * 10)
    # sampled normal runs: the rate their variance over their mean
    rng = np.random.default_rng(0)
    sampled = 1e-2 + 1e-3 * rng.standard_normal(20_000)
    assert cal.spread_rate(sampled) == pytest.approx(1e-6 / 1e-2, rel=0.03)


def test_noise_rate_times_the_work_in_turns_after_one_untimed_run(monkeypatch):
    from gnnscale.comm.single import SingleCommunicator

    monkeypatch.setattr(cal, "clock", FakeClock([9e-3, 11e-3]))
    calls = []
    rate = cal.noise_rate(SingleCommunicator(), work=lambda: calls.append(1), repeats=8,
                          turns=[0])
    assert len(calls) == 9 and rate == pytest.approx(np.pi * 1e-6 / 1e-2)
