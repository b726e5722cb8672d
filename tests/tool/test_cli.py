"""The ddph command line as a user meets it: every sub-command answers
--help, --version and --json the same way, JSON output parses as JSON, sizes
take one spelling, and the exit codes are the documented ones.

Run by ctest (tests/tool/CMakeLists.txt) with DDPH_BIN_DIR and DDPH_PLUGIN_DIR.
"""
import csv
import json
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
CONFIGS = os.path.join(SOURCE, "configs")
DDPH = os.path.join(os.environ["DDPH_BIN_DIR"], "ddph")
PLUGINS = os.environ["DDPH_PLUGIN_DIR"]
COMMANDS = ["plugins", "validate", "bench", "train", "validate-plugin", "lab", "choose"]


def ddph(*args, timeout=300):
    env = dict(os.environ, DDPH_PLUGIN_PATH=PLUGINS)
    return subprocess.run([DDPH, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def expected_version():
    """The package version from CMake's project() and the ABI from ddph.h:
    read from the sources, not from the tool."""
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        package = re.search(r"project\(ddphooks VERSION ([0-9.]+)", f.read()).group(1)
    with open(os.path.join(SOURCE, "abi", "include", "ddph", "ddph.h")) as f:
        header = f.read()
    major = re.search(r"#define DDPH_ABI_MAJOR (\d+)", header).group(1)
    minor = re.search(r"#define DDPH_ABI_MINOR (\d+)", header).group(1)
    return f"ddph {package} (ABI {major}.{minor})"


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def json_objects(text):
    """Each line as strict JSON: NaN, Infinity and -Infinity are refused, as
    every JSON parser but Python's refuses them."""
    objects = [json.loads(line, parse_constant=refuse_constant)
               for line in text.splitlines() if line.strip()]
    assert objects, "no JSON line in the output"
    return objects


def test_version_at_the_top_and_on_every_command():
    want = expected_version()
    r = ddph("--version")
    assert r.returncode == 0 and r.stdout.strip() == want, r
    for cmd in COMMANDS:
        r = ddph(cmd, "--version")
        assert r.returncode == 0, (cmd, r)
        assert r.stdout.strip() == want, (cmd, r.stdout)


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_has_help_that_names_json_and_the_exit_codes(cmd, flag):
    r = ddph(cmd, flag)
    assert r.returncode == 0, r
    assert f"Usage: ddph {cmd}" in r.stdout, r.stdout
    assert "--json" in r.stdout and "--version" in r.stdout, r.stdout
    assert "Exit status of every command: 0 success; 1 the command failed; 2 a usage error" \
        in r.stdout, r.stdout


def test_usage_errors_exit_2_and_name_the_problem():
    r = ddph("frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr, r
    r = ddph()
    assert r.returncode == 2, r
    for cmd in COMMANDS:
        r = ddph(cmd, "--no-such-flag")
        assert r.returncode == 2, (cmd, r)
        assert "--no-such-flag" in r.stderr, (cmd, r.stderr)
    r = ddph("train", "--config", os.path.join(CONFIGS, "allreduce.yaml"), "--world", "0")
    assert r.returncode == 2 and "--world" in r.stderr, r


def test_sizes_have_one_spelling_with_a_binary_unit():
    allreduce = os.path.join(CONFIGS, "allreduce.yaml")
    for cmd in ("bench", "train"):
        r = ddph(cmd, "--config", allreduce, "--bucket-size", "4KB")
        assert r.returncode == 2, (cmd, r)
        assert "--bucket-size: '4KB' is not a size" in r.stderr, r.stderr
        for old in ("--bucket-mb", "--bucket-kb"):
            r = ddph(cmd, "--config", allreduce, old, "1")
            assert r.returncode == 2, (cmd, old, r)


def test_plugins_json_lists_every_family_with_its_options():
    r = ddph("plugins", "--json")
    assert r.returncode == 0, r
    objects = json_objects(r.stdout)
    assert objects[0]["search_path"][0] == PLUGINS
    families = {o["family"]: o for o in objects[1:]}
    assert {"default", "comm_gloo", "powersgd", "quantization"} <= set(families)
    hooks = {h["name"]: h for h in families["powersgd"]["hooks"]}
    rank = {o["name"]: o for o in hooks["powersgd"]["options"]}["rank"]
    assert rank["type"] == "int" and rank["default"] == "1", rank
    # 2^53, the largest integer a float option holds exactly, printed in full.
    start = {o["name"]: o for o in hooks["powersgd"]["options"]}["start_iter"]
    assert start["max"] == 2 ** 53, start
    gloo = families["comm_gloo"]["comms"][0]
    assert gloo["backend"] == "gloo"


def test_plugins_prints_integer_bounds_in_full():
    r = ddph("plugins")
    assert r.returncode == 0, r
    assert "e+" not in "".join(l for l in r.stdout.splitlines() if "(int," in l), r.stdout


def test_validate_json_one_object_per_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("comm: {backend: gloo}\nhook: {family: default, name: allreduce, x: 1}\n")
    good = os.path.join(CONFIGS, "allreduce.yaml")
    r = ddph("validate", "--json", good, str(bad))
    assert r.returncode == 1, r
    ok, failed = json_objects(r.stdout)
    assert ok == {"file": good, "ok": True, "problems": [], "not_checked": []}
    assert failed["file"] == str(bad) and failed["ok"] is False
    assert any(":2:" in p and "hook.x" in p for p in failed["problems"]), failed
    # --config is the spelling train and bench use; validate takes it too.
    r = ddph("validate", "--config", good)
    assert r.returncode == 0 and r.stdout.strip() == f"{good}: ok", r


def test_bench_json():
    r = ddph("bench", "--json", "--config", os.path.join(CONFIGS, "fp16.yaml"), "--world", "2",
             "--bucket-size", "256KiB", "--iters", "2", "--warmup", "1")
    assert r.returncode == 0, r
    row, = json_objects(r.stdout)
    assert row["bucket_bytes"] == 256 * 1024, row


def test_bench_pairs_alternate_hook_and_baseline():
    """Each hook iteration is followed by its baseline allreduce, before the
    next hook iteration starts (rank 0's clock), so that a burst of load on
    the machine hits both; the ratio is the median of the pairs' ratios.
    Before, --json had no "pairs" and the ratio was the ratio of the medians."""
    iters = 5
    r = ddph("bench", "--json", "--config", os.path.join(CONFIGS, "allreduce.yaml"), "--world",
             "2", "--bucket-size", "64KiB", "--iters", str(iters), "--warmup", "1")
    assert r.returncode == 0, r
    row, = json_objects(r.stdout)
    pairs = row["pairs"]
    assert len(pairs) == iters, row
    assert pairs[0]["hook_start_s"] == 0, row
    # hook, then baseline, then the next pair's hook, on rank 0's clock. The
    # times are the slowest rank's, which may have started before rank 0, so
    # only the starts are ordered against each other.
    starts = []
    for p in pairs:
        assert p["hook_s"] > 0 and p["baseline_s"] > 0, p
        starts += [p["hook_start_s"], p["baseline_start_s"]]
    assert starts == sorted(starts) and len(set(starts)) == len(starts), pairs
    ratios = sorted(p["hook_s"] / p["baseline_s"] for p in pairs)
    assert row["ratio_to_baseline"] == pytest.approx(ratios[iters // 2], rel=1e-12), row
    hooks = sorted(p["hook_s"] for p in pairs)
    assert row["median_s"] == pytest.approx(hooks[iters // 2], rel=1e-12), row


def test_train_json_and_metrics_csv(tmp_path):
    metrics = tmp_path / "m.csv"
    r = ddph("train", os.path.join(CONFIGS, "fp16.yaml"), "--json", "--steps", "40",
             "--log-every", "10", "--bucket-size", "1KiB", "--metrics", str(metrics))
    assert r.returncode == 0, r
    objects = json_objects(r.stdout)
    assert objects[0]["event"] == "start" and objects[0]["bucket_bytes"] == 1024
    steps = [o for o in objects if o["event"] == "step"]
    assert [o["step"] for o in steps] == [1, 10, 20, 30, 40]
    summary = objects[-1]
    assert summary["event"] == "summary" and summary["parameters_identical"] is True
    with open(metrics) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["step", "loss", "accuracy", "bytes_in", "bytes_out", "wire_bytes",
                             "compression", "hook_seconds", "wall_seconds", "hook", "choices"]
    assert {row["hook"] for row in rows} == {"default/fp16_compress"}
    assert {row["choices"] for row in rows} == {""}  # a fixed hook chooses nothing
    assert [int(row["step"]) for row in rows] == [1, 10, 20, 30, 40]
    for row, step in zip(rows, steps):
        assert float(row["loss"]) == pytest.approx(step["loss"], rel=1e-5)
        # fp16 compression: every gradient byte goes out as half as many.
        assert float(row["bytes_out"]) * 2 == pytest.approx(float(row["bytes_in"]))
        assert float(row["compression"]) == pytest.approx(2.0)
        assert float(row["hook_seconds"]) > 0
    # Every float32 gradient goes through the hook once a step.
    assert float(rows[-1]["bytes_in"]) == objects[0]["params"] * 4


def test_validate_plugin_json():
    plugin = os.path.join(PLUGINS, "libddph_debugging.so")
    r = ddph("validate-plugin", "--json", plugin, timeout=600)
    assert r.returncode == 0, r
    report, = json_objects(r.stdout)
    assert report["plugin"] == plugin and report["ok"] is True
    assert all(c["result"] in ("PASS", "SKIP") for c in report["checks"]), report


def test_lab_json():
    r = ddph("lab", "--json", "--link", "1gbit", "--world", "2", "--", "true")
    if r.returncode == 3:
        pytest.skip("no network lab on this machine: " + r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, r
    summary = json_objects(r.stdout)[-1]
    assert summary["ok"] is True and summary["world"] == 2
    assert [(x["rank"], x["exit"]) for x in summary["ranks"]] == [(0, 0), (1, 0)]


def test_train_that_diverges_fails_with_null_numbers_in_json():
    """A learning rate far too large (100, momentum 1, on a 512-wide model)
    drives the loss and the parameters to NaN within 50 steps: before, the
    JSON said "final_loss": -nan (not JSON) and "parameters_identical": true,
    and the command exited 0."""
    diverging = [os.path.join(CONFIGS, "allreduce.yaml"), "--steps", "50", "--log-every", "25",
                 "--lr", "100", "--momentum", "1", "--hidden", "512"]
    r = ddph("train", "--json", *diverging)
    assert r.returncode == 4, r  # docs/cli.md: 4, the training diverged
    objects = json_objects(r.stdout)  # strict: a bare NaN fails here
    summary = objects[-1]
    assert summary["event"] == "summary" and summary["diverged"] is True, summary
    assert summary["parameters_identical"] is False, summary
    assert summary["final_loss"] is None and summary["non_finite_parameters"] > 0, summary
    assert objects[-2]["event"] == "step" and objects[-2]["loss"] is None, objects[-2]
    assert r.stderr.count("training diverged") == 2, r.stderr  # each rank says it
    r = ddph("train", *diverging)
    assert r.returncode == 4 and "training DIVERGED" in r.stdout, r


def test_validate_shows_a_yamls_control_characters_escaped(tmp_path):
    """Before, a key's ANSI escape reached the terminal as-is (issue 38, 19)."""
    bad = tmp_path / "ansi.yaml"
    bad.write_text('hook: {family: default, name: allreduce}\n"\\e[2J\\e[31mred": 1\n')
    for flags in ([], ["--json"]):
        r = ddph("validate", *flags, str(bad))
        assert r.returncode == 1, r
        assert "\x1b" not in r.stdout, r.stdout
        text = r.stdout if not flags else json_objects(r.stdout)[0]["problems"][0]
        assert f"{bad}:2:1: \\x1b[2J\\x1b[31mred: unknown top-level key" in text, r.stdout
