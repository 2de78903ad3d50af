#!/usr/bin/env bash
# check_torch2_context_parallel.sh CPPARITY SOURCE_DIR — torch 2's own context parallelism judged
# by cpparity's pytest plugin: tests/python/test_torch2_context_parallel.py (what it runs and
# which planted bugs must fail how is said there), in the pinned PyTorch 2 environment
# (scripts/torch2-env.sh; torch 2.15, pytest 9.2) on gloo CPU processes. The example's ranks are
# forked from the pytest process, so torch is imported once (tests/python/conftest.py). Every
# judged run's results file is kept for the parity matrix when $CPPARITY_MATRIX_RESULTS is set.
# About a minute alone on two cores. Exit 0 when every test passes (40: 36 runs judged PASS, 3
# planted bugs judged FAIL as expected, the ring's claims), 1 otherwise, 77 (skip) when the
# PyTorch 2 environment cannot be made or torch's CP, pytest or a gloo process group is
# unavailable in it.
set -u
cpparity=$1
source_dir=$2
work=$(mktemp -d /tmp/cpparity-torch2-cp-XXXXXX)
trap 'rm -rf "$work"' EXIT
source "$source_dir/tests/judge/example_steps.sh" # fail, skip, torch2_python, pytest_file, ...

torch2_python
if ! gloo_works "from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._context_parallel import _attention
from torch.nn.attention.flex_attention import flex_attention
import pytest"; then
    skip "torch's context parallelism, pytest or a gloo group is unavailable to $python:" \
        "$work/probe.out"
fi
pytest_file "$source_dir/tests/python/test_torch2_context_parallel.py" 40
exit 0
