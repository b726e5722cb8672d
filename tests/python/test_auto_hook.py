"""`hook: {family: auto}` under PyTorch DDP, 2 ranks on Gloo
(auto_hook_ranks.py): every bucket's metrics record names the candidate that
ran it and why, the ranks agree on every choice, the warm-up runs plain
allreduce, and the replicas stay identical whatever was chosen."""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import ddphooks.metrics  # noqa: E402
from ranks import spawn  # noqa: E402

WORLD = 2
WARMUP_STEPS = 2  # auto_hook_ranks.CONFIG's warmup_steps
REASONS = {"warmup", "explore", "fastest", "critical"}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    load = spawn("auto_hook_ranks.py", WORLD, tmp_path_factory.mktemp("auto"), timeout=200)
    return load("auto")


def test_every_bucket_record_names_its_candidate_and_reason(ranks):
    for r, res in enumerate(ranks):
        assert res["names"] == list(ddphooks.metrics.DEFAULT_CANDIDATES)
        assert res["records"], "rank %d recorded no bucket" % r
        steps = {step for step, _, _, _ in res["records"]}
        assert steps == set(range(30)), (r, sorted(steps))
        for step, bucket, name, reason in res["records"]:
            assert name in res["names"] and reason in REASONS, (r, step, bucket, name, reason)


def test_both_ranks_record_the_same_choices(ranks):
    assert ranks[0]["records"] == ranks[1]["records"]


def test_warmup_runs_allreduce_then_the_chooser_explores(ranks):
    records = ranks[0]["records"]
    for step, bucket, name, reason in records:
        if step < WARMUP_STEPS:
            assert reason == "warmup", (step, bucket, reason)
        if reason == "warmup":
            assert name == "allreduce", (step, bucket, name)
    # 30 steps are past the warm-up: the chooser timed other candidates.
    assert any(reason == "explore" and name != "allreduce" for _, _, name, reason in records)


def test_parameters_identical_on_both_ranks(ranks):
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])


def test_candidate_names_read_the_option_or_the_default():
    auto = {"family": "auto", "name": "auto"}
    assert ddphooks.metrics.candidate_names({"hook": auto}) == [
        "allreduce", "fp16", "bf16", "q8", "q4ef", "powersgd4"]
    assert ddphooks.metrics.candidate_names(
        {"hook": dict(auto, options={"candidates": "q8, default/allreduce"})}) == [
            "q8", "default/allreduce"]
    assert ddphooks.metrics.candidate_names(
        "hook: {family: default, name: allreduce}\n") == []


def test_metrics_writer_lists_each_steps_choices(ranks):
    res = ranks[0]
    expected = {}
    for step, bucket, name, reason in sorted(res["records"]):
        expected.setdefault(step, []).append("%s:%s" % (name, reason))
    assert [int(row["step"]) for row in res["csv"]] == sorted(expected)
    for row in res["csv"]:
        assert row["choices"] == ";".join(expected[int(row["step"])]), row
