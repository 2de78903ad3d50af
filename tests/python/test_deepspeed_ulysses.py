"""DeepSpeed's Ulysses (deepspeed.sequence.layer.DistributedAttention) around examples/torch-cp's
model (run.py --attention deepspeed-ulysses) judged by cpparity's pytest plugin, on gloo CPU
processes; none of DeepSpeed's code is ours (run by ctest through tests/judge/check_external.sh,
in a venv of Debian's torch 1.13 with DeepSpeed 0.18.6, and in the pinned PyTorch 2 environment).

Two CI cases (packed documents crossing every shard boundary with left and right padding; S = 37
prime, so cp > 1 pads, with a sliding layer, packing and a position jump), with torch 2 three more
(Llama4-style chunked layers; chunks counted in positions with documents starting mid-stream;
fewer kv heads than cp): cp 1, 2 and 4 in f32, each cp > 1 also against the cp 1 run; bf16 at
cp 2 on the first case. Every run names DeepSpeed's version and the layout contiguous, and its
results file goes to the parity matrix (docs/frameworks.md) when $CPPARITY_MATRIX_RESULTS is set.
A planted bug at cp 2, where documents cross the shard boundary (each rank finds documents in its
own positions only), fails naming the logits of rank 1.
"""
import importlib.metadata
import os

import pytest
import torch

SUITE = os.path.join(os.path.dirname(__file__), "..", "..", "cases", "ci.yaml")
VERSION = importlib.metadata.version("deepspeed")
BACKEND = f"deepspeed-ulysses-{VERSION}"
ULYSSES = ("--attention", "deepspeed-ulysses")
PACKED = "packed-documents-spanning-ranks-with-length-1"
CASES = [PACKED, "autopad-prime-37-packed-position-jump"]
if int(torch.__version__.split(".")[0]) >= 2:  # torch 2's DeepSpeed takes these too
    CASES += ["llama4-style-chunked-full", "chunked-position-origin-c7-mid-stream-starts",
              "gqa-kv-heads-fewer-than-cp"]


def judged(case):
    """Judges the case's dumps now: passed, DeepSpeed named, the layout contiguous."""
    verdict = case.judge().raise_for_failure()
    assert verdict.implementation == f"deepspeed {VERSION}", verdict.path
    layouts = {item.layout for item in verdict.items if item.cp == case.cp}  # not the baseline's
    assert layouts == {"contiguous"}, f"layout {layouts}, expected contiguous"
    return verdict


@pytest.mark.cpparity(suite=SUITE, cases=CASES, cp=[1, 2, 4])
def test_ulysses(cpparity_case, run_example, cp_1_dump, matrix):
    run_example(cpparity_case, *ULYSSES)
    if cpparity_case.cp > 1:
        cpparity_case.baseline = cp_1_dump(cpparity_case, *ULYSSES)
    judged(cpparity_case)
    matrix.keep(cpparity_case, BACKEND, f"{cpparity_case.case}-f32-cp{cpparity_case.cp}")


@pytest.mark.cpparity(suite=SUITE, cases=[PACKED], cp=[2], dtype="bf16")
def test_ulysses_bf16(cpparity_case, run_example, matrix):
    run_example(cpparity_case, *ULYSSES, "--dtype", cpparity_case.dtype)
    judged(cpparity_case)
    matrix.keep(cpparity_case, BACKEND, f"{PACKED}-bf16-cp2")


@pytest.mark.cpparity(suite=SUITE, cases=[PACKED], cp=[2])
def test_planted_bug_fails(cpparity_case, run_example):
    cpparity_case.expect_failure(r"FAIL logits rank 1 batch row \d+ position \d+ vocab \d+: error")
    run_example(cpparity_case, *ULYSSES, "--wrong", "mask-from-local-positions")
