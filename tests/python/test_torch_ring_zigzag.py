"""The torch ring-zigzag example (examples/torch-cp/run.py) judged by cpparity's pytest plugin:
three cases at cp 2 and 4. CPPARITY_WRONG=NAME plants one of the example's bugs (run.py --wrong)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "..", "..", "examples", "torch-cp", "run.py")
SUITE = os.path.join(HERE, "..", "..", "cases", "ci.yaml")
WRONG = ["--wrong", os.environ["CPPARITY_WRONG"]] if os.environ.get("CPPARITY_WRONG") else []


@pytest.mark.cpparity(suite=SUITE, cp=[2, 4],
                      cases=["full-no-padding", "sliding-w5-odd-crossing-shards",
                             "packed-documents-spanning-ranks-with-length-1"])
def test_ring_zigzag(cpparity_case):
    subprocess.run([sys.executable, RUN, cpparity_case.export, "--cp", str(cpparity_case.cp),
                    "--attention", "ring", "--out", cpparity_case.dumps] + WRONG, check=True)
