"""`gnnscale tune`: target cluster options, calibration, recommendation and bad input."""

import json

import pytest

pytest.importorskip("torch")
from gnnscale.cli.main import main  # noqa: E402
from mpi_launch import DATASETS_ROOT  # noqa: E402
from planning.tune import choose  # noqa: E402

SBM = ["--dataset", "sbm", "--num-nodes", "300"]
FACEBOOK = DATASETS_ROOT / "SNAP-facebook-combined"


def exit_code(argv) -> int:
    """``main(argv)``'s exit status, also for errors argparse reports with SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_tune_writes_json_png_and_says_why(tmp_path, capsys):
    prefix = tmp_path / "tune"
    assert main(["tune", *SBM, "--methods", "random,metis,libra", "--parts", "2,4",
                 "--network", "2,100", "--ranks-per-host", "2", "--out", str(prefix),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "recommended:" in printed and "-bound" in printed and "mem/rank" in printed
    assert "2 rank(s) per host" in printed and "100 Gb/s" in printed
    result = json.loads(prefix.with_suffix(".json").read_text())
    assert len(result["rows"]) == 6
    assert result["why"] and "runners_up" in result
    assert all(r["predicted_peak_memory_bytes"] > 0 for r in result["rows"])
    assert prefix.with_suffix(".png").stat().st_size > 1000


@pytest.mark.parametrize("argv, message", [
    (["--network", "abc"], "expected LATENCY_US,GBIT_PER_S"),
    (["--network", "50,0"], "expected LATENCY_US,GBIT_PER_S"),
    (["--network=-1,10"], "expected LATENCY_US,GBIT_PER_S"),
    (["--network", "50"], "expected LATENCY_US,GBIT_PER_S"),
    (["--parts", "2,301"], "--parts 301 exceeds the 300 nodes"),
    (["--ranks-per-host", "0"], "must be a positive integer"),
    (["--methods", "nope"], "unknown partitioner"),
])
def test_tune_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert exit_code(["tune", *SBM, "--out", str(tmp_path / "t"), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "t.json").exists()


def test_tune_refuses_a_bad_cost_model_file(tmp_path, capsys):
    good = {"compute": {"1": {"gamma_edge": 1e-9, "gamma_flop": 1e-11, "gamma_elem": 1e-9,
                              "gamma_gather": 1e-9}},
            "shm_alpha": 1e-6, "shm_beta": 1e-10, "layer_overhead_s": 1e-4}
    cases = {"negative": {**good, "shm_beta": -1e-10}, "missing": {
        k: v for k, v in good.items() if k != "shm_alpha"}}
    for name, values in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(values))
        assert main(["tune", *SBM, "--parts", "2", "--methods", "random", "--cost-model",
                     str(path), "--out", str(tmp_path / "t"), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert str(path) in err and len(err.splitlines()) == 1
        assert ("shm_beta must be finite and >= 0" if name == "negative"
                else "missing constant 'shm_alpha'") in err
    path = tmp_path / "good.json"
    path.write_text(json.dumps(good))
    assert main(["tune", *SBM, "--parts", "2", "--methods", "random", "--cost-model", str(path),
                 "--out", str(tmp_path / "t"), "--no-progress", "--no-plot"]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["cost_model"] == {
        **good, "bytes_per_value": 4, "cache_bytes": 0.0, "exchange_overhead_s": 0.0,
        "exchange_byte_s": 0.0, "private_cache_bytes": 0.0, "noise_s": 0.0}


@pytest.mark.skipif(not FACEBOOK.is_dir(), reason="SNAP facebook not available")
def test_a_10_gbit_network_does_not_recommend_random_on_facebook(tmp_path, capsys):
    assert main(["tune", "--dataset", str(FACEBOOK), "--methods", "random,metis",
                 "--parts", "16", "--network", "50,10", "--out", str(tmp_path / "fb"),
                 "--no-progress", "--no-plot"]) == 0
    result = json.loads((tmp_path / "fb.json").read_text())
    rows = {r["method"]: r for r in result["rows"]}
    assert result["recommended"]["method"] != "random"
    assert rows["random"]["halo_bytes_max"] > 3 * rows["metis"]["halo_bytes_max"]


def test_alltoallv_fit_takes_latency_from_the_smallest_message_and_slope_from_the_largest():
    from gnnscale.cli.calibrate import fit_alltoallv

    rows = [{"bytes": b, "peers": 3, "seconds": 3 * 2e-5 + b * 1e-9}
            for b in (24, 3 << 10, 3 << 20)]
    fitted = fit_alltoallv(rows[::-1])
    assert fitted["shm_alpha"] == pytest.approx(2e-5, rel=1e-3)
    assert fitted["shm_beta"] == pytest.approx(1e-9, rel=1e-6)
    flat = fit_alltoallv([{"bytes": 8, "peers": 1, "seconds": 1e-3},
                          {"bytes": 8 << 20, "peers": 1, "seconds": 5e-4}])
    assert flat["shm_beta"] == 0.0  # a noisy slope is clipped at zero, never negative


def test_fixed_costs_split_into_per_layer_and_per_exchange_from_two_tiny_steps():
    from gnnscale.cli.calibrate import fit_fixed_costs

    layer, exchange, passes = 2e-3, 5e-4, 4  # 2 layers x forward and backward
    edge_cut = (passes * layer + 3 * exchange, 3)  # one exchange per aggregation
    vertex_cut = (passes * layer + 6 * exchange, 6)  # two
    assert fit_fixed_costs([edge_cut, vertex_cut], passes) == \
        (pytest.approx(layer), pytest.approx(exchange))
    # one step (one rank) or no more exchanges in the second: all of it per layer
    assert fit_fixed_costs([edge_cut], passes) == (pytest.approx(edge_cut[0] / passes), 0.0)
    assert fit_fixed_costs([edge_cut, edge_cut], passes)[1] == 0.0
    # noise that makes the vertex cut's residual the smaller: clipped, never negative
    assert fit_fixed_costs([edge_cut, (edge_cut[0] / 2, 6)], passes)[1] == 0.0
    assert fit_fixed_costs([(-1e-3, 3), (-5e-4, 6)], passes)[0] == 0.0


def test_ranks_measure_their_constants_as_many_at_once_as_the_host_has_cores_for():
    from gnnscale.cli.calibrate import measuring_turns

    assert measuring_turns(4, threads=1, host_cores=2) == [0, 0, 1, 1]
    assert measuring_turns(3, threads=2, host_cores=2) == [0, 1, 2]  # a rank fills the host
    assert measuring_turns(8, threads=1, host_cores=32) == [0] * 8
    assert measuring_turns(2, threads=4, host_cores=2) == [0, 1]  # more threads than cores


def test_the_working_set_beyond_the_cache_fits_the_memory_of_the_ranks_measuring_at_once():
    from gnnscale.cli.calibrate import (MAX_WORKING_SET, PEAK_PER_WORKING_SET,
                                        beyond_cache_working_set)

    mib, gib = 1 << 20, 1 << 30
    assert beyond_cache_working_set(8 * mib, available=64 * gib) == 32 * mib  # 4x the cache
    # a virtual machine reporting its host's 480 MiB cache: capped, not 1.9 GiB per array
    assert beyond_cache_working_set(480 * mib, available=64 * gib) == MAX_WORKING_SET
    # little memory, two ranks measuring at once: each keeps to its share of a quarter of it
    two = beyond_cache_working_set(480 * mib, measuring_at_once=2, available=2 * gib)
    assert 2 * PEAK_PER_WORKING_SET * two <= gib // 2
    assert two < beyond_cache_working_set(480 * mib, measuring_at_once=1, available=2 * gib)
    assert beyond_cache_working_set(480 * mib, available=0) == 16 * mib  # a floor to measure


def test_calibrate_in_job_on_two_ranks(tmp_path):
    from mpi_launch import REPO_ROOT, run_python_mpi

    script = tmp_path / "in_job.py"
    script.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "from gnnscale.comm import init\n"
        "from gnnscale.cli.calibrate import calibrate_in_job, job_fixed_costs\n"
        "comm = init()\n"
        "costs = calibrate_in_job(comm, threads=1, scale=0.05)\n"
        "print(json.dumps(costs.to_dict()))\n"
        "print('sage', *job_fixed_costs(comm, costs, 1, 2, 'sage'))\n"
        "try:\n"
        "    job_fixed_costs(comm, costs, 1, 2, 'mlp')\n"
        "except Exception as exc:\n"
        "    print('refused', exc)\n")
    done = run_python_mpi(2, script, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 2 and lines[0]["compute"] == lines[1]["compute"]  # medians agree
    values = lines[0]
    assert set(values["compute"]) == {"1"} and values["shm_alpha"] > 0
    assert values["layer_overhead_s"] >= 0
    from gnnscale.cli.calibrate import last_level_cache_bytes, private_cache_bytes

    # the knee both ranks measured, times the 2 ranks on this host: within the cache reported
    assert 0 < values["cache_bytes"] <= last_level_cache_bytes()
    # and the cache each core has to itself, which the streaming ops count on
    assert values["private_cache_bytes"] == private_cache_bytes()
    # SAGE's own tiny steps give its fixed costs; a model the cost model lacks is refused
    sage = [x.split()[1:] for x in done.stdout.splitlines() if x.startswith("sage ")]
    assert len(sage) == 2 and all(0 <= float(v) < 1 for v in sage[0])
    assert values["exchange_byte_s"] == 0.0  # one host: its exchanges copy (shm_beta)
    # how much the ranks' work varies, measured with both at once (each has a core)
    assert 0 < values["noise_s"] < 1e-2
    assert "refused unknown model 'mlp'" in done.stdout


SBM_2000 = ["--dataset", "sbm", "--num-nodes", "2000"]


def test_tune_chooses_ranks_per_host_halo_dtype_and_staleness(tmp_path, capsys):
    prefix = tmp_path / "t"
    assert main(["tune", *SBM_2000, "--methods", "metis", "--cores", "64", "--host-cores", "32",
                 "--network", "2,1", "--halo-dtypes", "float32,int8", "--staleness",
                 "exact,pipelined", "--out", str(prefix), "--no-progress", "--no-plot"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(prefix.with_suffix(".json").read_text())
    rows = result["rows"]
    # per host (2 ranks), per socket (4), per core (64): each its own partition, 4 halo settings
    assert sorted({(r["parts"], r["ranks_per_host"], r["threads_per_rank"]) for r in rows}) == \
        [(2, 1, 32), (4, 2, 16), (64, 32, 1)]
    assert len(rows) == 12
    assert {(r["halo_dtype"], r["staleness"]) for r in rows} == {
        ("float32", "exact"), ("float32", "pipelined"), ("int8", "exact"), ("int8", "pipelined")}
    best = result["recommended"]
    assert best == choose(rows)
    assert f"recommended: metis with {best['parts']} parts, {best['placement_label']}, " \
           f"--halo-dtype {best['halo_dtype']} --staleness {best['staleness']}" in printed
    assert "why: " in printed and "at best" in printed and result["why_chosen"] in printed
    assert "ranks/host" in printed and "staleness" in printed
    # the same partition and placement: int8 sends fewer bytes per step than float32
    by = {(r["parts"], r["halo_dtype"], r["staleness"]): r for r in rows}
    assert by[(64, "int8", "exact")]["predicted_halo_bytes_step_max"] < \
        by[(64, "float32", "exact")]["predicted_halo_bytes_step_max"]


@pytest.mark.parametrize("argv, message", [
    (["--halo-dtypes", "float32,int3"], "unknown halo dtype 'int3'"),
    (["--staleness", "delayed:0"], "unknown staleness 'delayed:0'"),
    (["--cores", "48", "--host-cores", "32", "--network", "2,100"],
     "48 cores are not whole hosts of 32 cores"),
    (["--cores", "64", "--host-cores", "32"], "--cores 64 spans hosts of 32 cores: give the "
                                              "--network"),
    (["--cores", "8", "--parts", "2"], "--cores chooses the ranks and threads: leave out --parts"),
    (["--cores", "64", "--host-cores", "32", "--sockets", "3", "--network", "2,100"],
     "do not split into 3 sockets"),
    (["--cores", "64", "--host-cores", "32", "--network", "2,100", "--placements", "rack"],
     "unknown placement 'rack'"),
    (["--cores", "4096", "--host-cores", "32", "--network", "2,100"],
     "needs 4096 parts, more than the 2000 nodes"),
])
def test_tune_refuses_what_it_cannot_model_in_one_line(tmp_path, capsys, argv, message):
    assert exit_code(["tune", *SBM_2000, "--methods", "metis", "--out", str(tmp_path / "t"),
                      "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "t.json").exists()
