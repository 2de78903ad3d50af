"""torch 2's own context parallelism judged by cpparity's pytest plugin, on gloo CPU processes:
two backends of examples/torch-cp/run.py, none of whose CP code is ours (run by ctest through
tests/judge/check_torch2_context_parallel.sh in the pinned PyTorch 2 environment).

- torch-cp-ring (torch_context_parallel.py): torch's `context_parallel` around SDPA with
  is_causal, i.e. its ring attention (rotation by all-gather or all-to-all, log-sum-exp merge)
  and its head-tail load balancer. It has no mask beyond is_causal, so it claims only cases whose
  every layer is full causal attention on unpadded one-document rows: of cases/ci.yaml that is
  full-no-padding; every other case is recorded as not supported (f32 at cp 2, bf16 at cp 4).
  Runs: cp 1; cp 2 and 4 with each rotation and each balancing (head-tail: the layout named
  zigzag; none: contiguous), each also against the cp 1 run; bf16 at cp 4. Planted bugs at cp 2:
  the ring computing with load balancing off on head-tail shards (FAIL logits rank 0 and 1), the
  dump stating contiguous positions (FAIL logits rank 0).
- torch-cp-flex (torch_flex_context_parallel.py): flex_attention under torch's CP (keys and
  values all-gathered, torch's CP block mask rewriting local to global indices, its load
  balancers), the case's exact mask as a mask_mod on global positions. Six cases, together
  covering padding left and right, packed documents crossing shards, sliding windows, chunked
  layers of each chunk origin, MQA/GQA with fewer kv heads than cp and automatic padding, at cp 1,
  2 and 4 in f32 with head-tail (zigzag), each cp > 1 also against its cp 1 run; bf16 at cp 2 and
  no load balancing (contiguous) at cp 4 on the packed-documents case; the PTRR load balancer at
  cp 2 and 4 on three cases (its layout named by the judge). Planted bug at cp 2: block masks
  made on local query indices (FAIL logits rank 1).
Every judged run names torch's version, and its results file goes to the parity matrix
(docs/frameworks.md) when $CPPARITY_MATRIX_RESULTS is set.
"""
import os

import pytest
import torch

import cpparity
import cpparity_dump

SUITE = os.path.join(os.path.dirname(__file__), "..", "..", "cases", "ci.yaml")
RING = ("--attention", "torch-cp-ring")
FLEX = ("--attention", "torch-cp-flex")
FLEX_CASES = ["packed-documents-spanning-ranks-with-length-1", "llama4-style-chunked-full",
              "chunked-document-origin", "chunked-position-origin-c7-mid-stream-starts",
              "mqa-single-kv-head", "autopad-prime-37-packed-position-jump"]
PACKED = "packed-documents-spanning-ranks-with-length-1"
LOGITS_AT = r"batch row \d+ position \d+ vocab \d+: error"  # where the console names an element


def judged(case, layout=None):
    """Judges the case's dumps now: passed, torch named, the token layout the judge found."""
    verdict = case.judge().raise_for_failure()
    assert verdict.implementation == f"torch {torch.__version__}", verdict.path
    layouts = {item.layout for item in verdict.items if item.cp == case.cp}  # not the baseline's
    if layout is not None:
        assert layouts == {layout}, f"layout {layouts}, expected {layout}"
    else:
        assert "" not in layouts, f"the judge named no layout ({verdict.path})"
    return verdict


# --- torch-cp-ring -----------------------------------------------------------------------------

def test_ring_claims_only_unpadded_causal_cases(cpparity_export, matrix):
    import torch_context_parallel  # examples/torch-cp, on sys.path through conftest's example
    reasons = {}
    for name in cpparity.cases(SUITE):
        if not name.startswith("refuse-"):
            export = cpparity_dump.read_export(cpparity_export(SUITE, name))
            reasons[name] = torch_context_parallel.unsupported_reason(export)
    assert [name for name, reason in reasons.items() if reason is None] == ["full-no-padding"]
    for name, reason in reasons.items():
        if reason is not None:
            for dtype, cp in (("f32", 2), ("bf16", 4)):
                matrix.not_supported("torch-cp-ring", "torch", torch.__version__, name, dtype,
                                     cp, reason)


@pytest.mark.cpparity(suite=SUITE, cases=["full-no-padding"], cp=[1])
def test_ring_cp_1(cpparity_case, run_example, matrix):
    run_example(cpparity_case, *RING)
    judged(cpparity_case, "contiguous")
    matrix.keep(cpparity_case, "torch-cp-ring", "full-no-padding-f32-cp1")


@pytest.mark.cpparity(suite=SUITE, cases=["full-no-padding"], cp=[2, 4])
@pytest.mark.parametrize("rotate", ["allgather", "alltoall"])
@pytest.mark.parametrize("balancer, layout", [("head-tail", "zigzag"), ("none", "contiguous")])
def test_ring(cpparity_case, run_example, cp_1_dump, matrix, rotate, balancer, layout):
    run_example(cpparity_case, *RING, "--rotate", rotate, "--load-balancer", balancer)
    cpparity_case.baseline = cp_1_dump(cpparity_case, *RING)
    judged(cpparity_case, layout)
    matrix.keep(cpparity_case, "torch-cp-ring",
                f"full-no-padding-f32-cp{cpparity_case.cp}-{rotate}-{balancer}")


@pytest.mark.cpparity(suite=SUITE, cases=["full-no-padding"], cp=[4], dtype="bf16")
def test_ring_bf16(cpparity_case, run_example, matrix):
    run_example(cpparity_case, *RING, "--dtype", cpparity_case.dtype)
    judged(cpparity_case, "zigzag")
    matrix.keep(cpparity_case, "torch-cp-ring", "full-no-padding-bf16-cp4")


@pytest.mark.cpparity(suite=SUITE, cases=["full-no-padding"], cp=[2])
@pytest.mark.parametrize("wrong, expected", [
    pytest.param("load-balance-off-in-ring", [f"FAIL logits rank 0 {LOGITS_AT}",
                                              f"FAIL logits rank 1 {LOGITS_AT}"],
                 id="load-balance-off-in-ring"),
    pytest.param("token-indices-unsharded-order", [f"FAIL logits rank 0 {LOGITS_AT}"],
                 id="token-indices-unsharded-order")])
def test_ring_planted_bug_fails(cpparity_case, run_example, wrong, expected):
    cpparity_case.expect_failure(*expected)
    run_example(cpparity_case, *RING, "--wrong", wrong)


# --- torch-cp-flex -----------------------------------------------------------------------------

@pytest.mark.cpparity(suite=SUITE, cases=FLEX_CASES, cp=[1, 2, 4])
def test_flex(cpparity_case, run_example, cp_1_dump, matrix):
    run_example(cpparity_case, *FLEX)
    if cpparity_case.cp > 1:
        cpparity_case.baseline = cp_1_dump(cpparity_case, *FLEX)
    judged(cpparity_case, "contiguous" if cpparity_case.cp == 1 else "zigzag")
    matrix.keep(cpparity_case, "torch-cp-flex", f"{cpparity_case.case}-f32-cp{cpparity_case.cp}")


@pytest.mark.cpparity(suite=SUITE, cases=[PACKED], cp=[2], dtype="bf16")
def test_flex_bf16(cpparity_case, run_example, matrix):
    run_example(cpparity_case, *FLEX, "--dtype", cpparity_case.dtype)
    judged(cpparity_case, "zigzag")
    matrix.keep(cpparity_case, "torch-cp-flex", f"{PACKED}-bf16-cp2")


@pytest.mark.cpparity(suite=SUITE, cases=[PACKED], cp=[4])
def test_flex_without_load_balancing(cpparity_case, run_example, matrix):
    run_example(cpparity_case, *FLEX, "--load-balancer", "none")
    judged(cpparity_case, "contiguous")
    matrix.keep(cpparity_case, "torch-cp-flex", f"{PACKED}-f32-cp4-none")


@pytest.mark.cpparity(suite=SUITE, cases=["sliding-w2-packed", "autopad-prime-length-23", PACKED],
                      cp=[2, 4])
def test_flex_ptrr(cpparity_case, run_example, matrix):
    run_example(cpparity_case, *FLEX, "--load-balancer", "ptrr")
    judged(cpparity_case)  # PTRR's own order: whatever layout the judge names it
    matrix.keep(cpparity_case, "torch-cp-flex",
                f"{cpparity_case.case}-f32-cp{cpparity_case.cp}-ptrr")


@pytest.mark.cpparity(suite=SUITE, cases=[PACKED], cp=[2])
def test_flex_planted_bug_fails(cpparity_case, run_example):
    cpparity_case.expect_failure(f"FAIL logits rank 1 {LOGITS_AT}")
    run_example(cpparity_case, *FLEX, "--wrong", "block-mask-on-local-queries")
