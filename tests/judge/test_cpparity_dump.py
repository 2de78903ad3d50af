#!/usr/bin/env python3
"""Tests of python/cpparity_dump.py and tests/judge/make_dumps.py (docs/dump-format.md).

Self-contained: builds a tiny fake export (B = 2, S = 6, V = 5, two parameters) with h5py in a
temporary folder, in the layout of docs/command-line.md's `cpparity export`. Plain asserts;
prints one line per test and exits 0 when every test passes, 1 otherwise.
"""

import contextlib
import importlib.util
import io
import os
import sys
import tempfile
import traceback

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import cpparity_dump  # noqa: E402


def load_make_dumps():
    spec = importlib.util.spec_from_file_location("make_dumps", os.path.join(HERE, "make_dumps.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_dumps = load_make_dumps()

DIGEST = "0123456789abcdef0123456789abcdef"
PARAMETER_SHAPES = {"lm_head.weight": (5, 3), "model.norm.weight": (3,)}
B, S, V = 2, 6, 5


def write_fake_export(path, with_digest=True, parameter_shapes=None):
    """A 2-row, S = 6, V = 5 export; row 1 has two tokens of right padding.

    parameter_shapes defaults to PARAMETER_SHAPES (two tiny parameters).
    """
    rng = np.random.default_rng(1)
    input_ids = np.array([[3, 1, 4, 1, 2, 4], [2, 3, 3, 1, 0, 0]], dtype=np.int64)
    attention_mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=np.int8)
    position_ids = np.array([[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 0, 0]], dtype=np.int64)
    labels = np.array([[1, 4, 1, 2, 4, -100], [3, 3, 1, -100, -100, -100]], dtype=np.int64)
    with h5py.File(path, "w") as file:
        model = file.create_group("model")
        model.attrs["vocab_size"] = np.int64(V)
        model.attrs["hidden_size"] = np.int64(3)
        model.attrs["rms_norm_eps"] = np.float64(1e-6)
        model.attrs["layer_types"] = np.array([b"full_attention"], dtype="S14")
        model.attrs["chunk_origin"] = np.bytes_(b"row")
        model.attrs["case"] = np.bytes_(b"tiny")
        model.attrs["seed"] = np.int64(7)
        if with_digest:
            model.attrs["digest"] = np.bytes_(DIGEST.encode())
        suite = file.create_dataset("source/suite_yaml",
                                    data=np.frombuffer(b"cases:\n  - name: tiny\n", np.uint8))
        suite.attrs["path"] = np.bytes_(b"cases/tiny.yaml")
        for name, value in (("input_ids", input_ids), ("labels", labels),
                            ("attention_mask", attention_mask), ("position_ids", position_ids)):
            file.create_dataset(f"inputs/{name}", data=value)
        for name, shape in (parameter_shapes or PARAMETER_SHAPES).items():
            file.create_dataset(f"weights/{name}", data=rng.uniform(-1, 1, shape))
            file.create_dataset(f"reference/grads/{name}", data=rng.uniform(-1, 1, shape))
        file.create_dataset("reference/loss", data=np.float64(1.625))
        file.create_dataset("reference/logits", data=rng.uniform(-3, 3, (B, S, V)))


def dump_arguments(export, **changes):
    """Valid write_rank_dump arguments for rank 0 of 2 (contiguous), with `changes` applied."""
    positions = export.token_indices("contiguous", 2, 0)
    arguments = dict(
        export=export, rank=0, cp=2, token_indices=positions, loss=1.5,
        logits=np.ones((B, len(positions), V)),
        gradients={name: np.full(shape, 0.5) for name, shape in PARAMETER_SHAPES.items()},
        framework="numpy", framework_version="1.24", dtype="f32", kernel="loops")
    arguments.update(changes)
    return arguments


def attribute_text(value):
    return value.decode() if isinstance(value, bytes) else value


def test_read_export(folder, export):
    assert export.case == "tiny" and export.seed == 7 and export.digest == DIGEST
    assert isinstance(export.seed, int)
    assert export.model["layer_types"] == ["full_attention"]
    assert export.model["chunk_origin"] == "row" and export.model["vocab_size"] == V
    assert (export.batch_size, export.seq_len, export.vocab_size) == (B, S, V)
    assert export.parameter_names == sorted(PARAMETER_SHAPES)
    for name, shape in PARAMETER_SHAPES.items():
        assert export.weights[name].shape == shape and export.weights[name].dtype == np.float64
        assert export.reference.grads[name].shape == shape
    assert export.reference.loss == 1.625 and export.reference.logits.shape == (B, S, V)
    assert export.suite_yaml == "cases:\n  - name: tiny\n"
    assert export.suite_path == "cases/tiny.yaml"
    assert export.inputs["attention_mask"].dtype == np.int8
    assert export.inputs["labels"][1, 4] == -100


def test_padded_length(folder, export):
    assert [export.padded_length(cp) for cp in (1, 2, 3, 4, 5)] == [6, 6, 6, 8, 10]
    assert [export.padded_length(cp, 2) for cp in (1, 2, 3, 4)] == [6, 8, 6, 8]
    assert export.padded_length(1, 4) == 8


def test_token_indices_partition(folder, export):
    for layout, per_rank in cpparity_dump.LAYOUT_CHUNKS_PER_RANK.items():
        for cp in (1, 2, 3):
            padded = export.padded_length(cp, per_rank)
            parts = [export.token_indices(layout, cp, rank) for rank in range(cp)]
            for part in parts:
                assert part.dtype == np.int64 and part.shape == (padded // cp,), (layout, cp)
            joined = np.sort(np.concatenate(parts))
            assert np.array_equal(joined, np.arange(padded)), (layout, cp, parts)


def test_token_indices_orders(folder, export):
    def ranks(layout, cp, padded=None):
        return [export.token_indices(layout, cp, r, padded).tolist() for r in range(cp)]

    assert ranks("contiguous", 1) == [[0, 1, 2, 3, 4, 5]]
    assert ranks("contiguous", 2) == [[0, 1, 2], [3, 4, 5]]
    assert ranks("contiguous", 3) == [[0, 1], [2, 3], [4, 5]]
    assert ranks("contiguous", 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert ranks("zigzag", 1) == [[0, 1, 2, 3, 4, 5]]
    assert ranks("zigzag", 2) == [[0, 1, 6, 7], [2, 3, 4, 5]]
    assert ranks("zigzag", 3) == [[0, 5], [1, 4], [2, 3]]
    assert ranks("round-robin", 1) == [[0, 1, 2, 3, 4, 5]]
    assert ranks("round-robin", 2) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert ranks("round-robin", 3) == [[0, 3], [1, 4], [2, 5]]
    assert ranks("zigzag", 2, 12) == [[0, 1, 2, 9, 10, 11], [3, 4, 5, 6, 7, 8]]
    for bad in (("zigzag", 2, 0, 6), ("contiguous", 2, 0, 4), ("diagonal", 2, 0, None),
                ("contiguous", 2, 2, None), ("contiguous", 0, 0, None)):
        try:
            export.token_indices(*bad)
        except ValueError:
            continue
        raise AssertionError(f"token_indices{bad} did not raise ValueError")


def test_pad_inputs(folder, export):
    padded = export.pad_inputs(8)
    expected_tail = {"input_ids": 0, "attention_mask": 0, "position_ids": 0, "labels": -100}
    for name, tail in expected_tail.items():
        assert padded[name].shape == (B, 8) and padded[name].dtype == export.inputs[name].dtype
        assert np.array_equal(padded[name][:, :S], export.inputs[name]), name
        assert (padded[name][:, S:] == tail).all(), name
    assert np.array_equal(export.pad_inputs(S)["labels"], export.inputs["labels"])
    try:
        export.pad_inputs(S - 1)
    except ValueError:
        return
    raise AssertionError("pad_inputs(S - 1) did not raise ValueError")


def test_write_full_round_trip(folder, export):
    path = os.path.join(folder, "full.h5")
    arguments = dump_arguments(export, rank=1, token_indices=export.token_indices("zigzag", 2, 1),
                               logits=np.arange(B * 4 * V, dtype=np.float64).reshape(B, 4, V))
    cpparity_dump.write_rank_dump(path, **arguments)
    cpparity_dump.write_rank_dump(path, **arguments)  # replaces an existing dump
    assert sorted(os.listdir(folder)) == sorted(["export.h5", "full.h5"]), os.listdir(folder)
    with h5py.File(path, "r") as file:
        attrs = file.attrs
        expected_text = {"format": "cpparity-rank-dump", "framework": "numpy",
                         "framework_version": "1.24", "kernel": "loops", "dtype": "f32",
                         "case": "tiny", "export_digest": DIGEST}
        for name, value in expected_text.items():
            assert attribute_text(attrs[name]) == value, (name, attrs[name])
        for name, value in (("format_version", 1), ("cp", 2), ("rank", 1), ("seed", 7)):
            assert attrs[name].dtype == np.int64 and attrs[name] == value, (name, attrs[name])
        assert set(attrs) == set(expected_text) | {"format_version", "cp", "rank", "seed"}
        # integrity (docs/results-file.md): fixed-length strings in the checksummed object
        # header, never the unchecksummed global heap; every dataset checksummed or compact
        for name in expected_text:
            assert not attrs.get_id(name).get_type().is_variable_str(), name
        unchecked = []
        file.visititems(lambda name, item: unchecked.append(name) if isinstance(
            item, h5py.Dataset) and not item.fletcher32 and item.id.get_create_plist(
            ).get_layout() != h5py.h5d.COMPACT and item.size > 0 else None)
        assert not unchecked, unchecked
        indices = file["token_indices"]
        assert indices.dtype == np.int64 and indices.shape == (B, 4)
        assert (indices[()] == [2, 3, 4, 5]).all()
        assert file["loss"].dtype == np.float64 and file["loss"].shape == ()
        assert file["loss"][()] == 1.5
        logits = file["logits"]
        assert logits.dtype == np.float32 and logits.shape == (B, 4, V)
        assert np.array_equal(logits[()], arguments["logits"])
        assert set(file) == {"token_indices", "loss", "logits", "gradients"}
        for name, shape in PARAMETER_SHAPES.items():
            dataset = file[f"gradients/{name}"]
            assert dataset.dtype == np.float32 and dataset.shape == shape
            assert (dataset[()] == 0.5).all()


def test_write_slices_round_trip(folder, export):
    path = os.path.join(folder, "slices.h5")
    slices = {"lm_head.weight": (7, np.arange(8, dtype=np.float64)),
              "model.norm.weight": (3, np.zeros(0))}
    cpparity_dump.write_rank_dump(path, **dump_arguments(
        export, gradients=None, gradient_slices=slices, dtype="bf16"))
    with h5py.File(path, "r") as file:
        assert "gradients" not in file and attribute_text(file.attrs["dtype"]) == "bf16"
        for name, (offset, values) in slices.items():
            dataset = file[f"gradient_slices/{name}"]
            assert dataset.dtype == np.float32 and dataset.shape == (len(values),)
            assert dataset.attrs["offset"].dtype == np.int64 and dataset.attrs["offset"] == offset
            assert np.array_equal(dataset[()], values)
    os.unlink(path)


def test_write_mixed_and_2d_indices(folder, export):
    path = os.path.join(folder, "mixed.h5")
    positions = np.tile(export.token_indices("contiguous", 2, 0), (B, 1)).astype(np.int32)
    cpparity_dump.write_rank_dump(path, **dump_arguments(
        export, token_indices=positions,
        gradients={"lm_head.weight": np.zeros((5, 3))},
        gradient_slices={"model.norm.weight": (0, np.ones(3))}))
    with h5py.File(path, "r") as file:
        assert file["token_indices"].dtype == np.int64
        assert set(file["gradients"]) == {"lm_head.weight"}
        assert set(file["gradient_slices"]) == {"model.norm.weight"}
    os.unlink(path)


def test_write_torch_tensors(folder, export):
    try:
        import torch
    except ImportError:
        print("  (torch not importable: skipped)")
        return
    path = os.path.join(folder, "torch.h5")
    logits = torch.randn(B, 3, V).to(torch.bfloat16)
    arguments = dump_arguments(
        export, token_indices=torch.arange(3), logits=logits, loss=torch.tensor(2.0),
        gradients={name: torch.ones(shape, dtype=torch.bfloat16)
                   for name, shape in PARAMETER_SHAPES.items()})
    arguments["framework_version"] = torch.__version__  # a str subclass, as a test passes it
    cpparity_dump.write_rank_dump(path, **arguments)
    with h5py.File(path, "r") as file:
        assert np.array_equal(file["logits"][()], logits.float().numpy())
        assert file["loss"][()] == 2.0 and file["token_indices"].dtype == np.int64
        assert attribute_text(file.attrs["framework_version"]) == str(torch.__version__)
    os.unlink(path)


def test_write_refusals(folder, export):
    no_digest_path = os.path.join(folder, "no-digest.h5")
    write_fake_export(no_digest_path, with_digest=False)
    no_digest = cpparity_dump.read_export(no_digest_path)
    os.unlink(no_digest_path)
    half = {name: np.zeros(shape) for name, shape in PARAMETER_SHAPES.items()
            if name != "model.norm.weight"}
    cases = {
        "logits shape": dict(logits=np.ones((B, 3, V - 1))),
        "logits rows": dict(logits=np.ones((B, 4, V))),
        "logits batch": dict(logits=np.ones((1, 3, V))),
        "gradient shape": dict(gradients={"lm_head.weight": np.zeros((3, 5)),
                                          "model.norm.weight": np.zeros(3)}),
        "rank >= cp": dict(rank=2),
        "negative rank": dict(rank=-1),
        "cp 0": dict(cp=0, rank=0),
        "missing parameter": dict(gradients=half),
        "gradient None": dict(gradients={**half, "model.norm.weight": None}),
        "unknown parameter": dict(gradients={**half, "model.norm.weight": np.zeros(3),
                                             "bogus": np.zeros(1)}),
        "parameter twice": dict(gradient_slices={"lm_head.weight": (0, np.zeros(15))}),
        "slice past the end": dict(gradients=half,
                                   gradient_slices={"model.norm.weight": (2, np.zeros(2))}),
        "slice not 1-D": dict(gradients=half,
                              gradient_slices={"model.norm.weight": (0, np.zeros((1, 3)))}),
        "bad dtype": dict(dtype="fp32"),
        "empty framework": dict(framework=""),
        "float indices": dict(token_indices=np.array([0.0, 1.0, 2.0])),
        "indices rows differ": dict(token_indices=np.array([[0, 1, 2], [0, 1, 3]])),
        "indices repeated": dict(token_indices=np.array([0, 1, 1])),
        "negative index": dict(token_indices=np.array([-1, 1, 2])),
        "loss not scalar": dict(loss=np.array([1.0, 2.0])),
    }
    path = os.path.join(folder, "refused.h5")
    for label, changes in cases.items():
        try:
            cpparity_dump.write_rank_dump(path, **dump_arguments(export, **changes))
        except ValueError as error:
            assert str(error), label
        else:
            raise AssertionError(f"{label}: write_rank_dump did not raise ValueError")
        assert sorted(os.listdir(folder)) == ["export.h5"], (label, os.listdir(folder))
    try:
        cpparity_dump.write_rank_dump(path, **dict(dump_arguments(export), export=no_digest))
    except ValueError as error:
        assert "digest" in str(error), error
    else:
        raise AssertionError("an export without digest: write_rank_dump did not raise ValueError")


def test_round_to_bfloat16(folder, export):
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -2.5, np.inf,
                       np.finfo(np.float32).max, 0.0], dtype=np.float32)
    expected = np.array([1.0, 1.0, 1 + 2**-6, 1 + 2**-7, -2.5, np.inf, np.inf, 0.0],
                        dtype=np.float32)
    assert np.array_equal(make_dumps.round_to_bfloat16(values), expected)
    assert np.isnan(make_dumps.round_to_bfloat16(np.array([np.nan], np.float32))).all()
    assert [make_dumps.flat_slice_bounds(5, 3, r) for r in range(3)] == [(0, 2), (2, 4), (4, 5)]
    assert [make_dumps.flat_slice_bounds(1, 3, r) for r in range(3)] == [(0, 1), (1, 1), (1, 1)]


def run_make_dumps(folder, *arguments):
    """make_dumps.py's main in this process; returns (status, stdout, stderr, out_dir)."""
    out_dir = os.path.join(folder, "dumps")
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = make_dumps.main([os.path.join(folder, "export.h5"), out_dir, *arguments])
    return status, stdout.getvalue(), stderr.getvalue(), out_dir


def read_dumps(out_dir):
    dumps = {}
    for entry in sorted(os.listdir(out_dir)):
        with h5py.File(os.path.join(out_dir, entry), "r") as file:
            dumps[entry] = {
                "attrs": {key: attribute_text(value) for key, value in file.attrs.items()},
                "token_indices": file["token_indices"][()], "loss": file["loss"][()],
                "logits": file["logits"][()],
                "gradients": {name: file[f"gradients/{name}"][()]
                              for name in file.get("gradients", {})},
                "slices": {name: (int(file[f"gradient_slices/{name}"].attrs["offset"]),
                                  file[f"gradient_slices/{name}"][()])
                           for name in file.get("gradient_slices", {})}}
    return dumps


def test_make_dumps_perfect(folder, export):
    reference = export.reference
    for layout in cpparity_dump.LAYOUT_CHUNKS_PER_RANK:
        for cp in (1, 2, 3):
            for gradients in ("full", "slices"):
                for dtype in ("f32", "bf16"):
                    status, out, err, out_dir = run_make_dumps(
                        folder, "--cp", str(cp), "--layout", layout, "--gradients", gradients,
                        "--dtype", dtype)
                    label = (layout, cp, gradients, dtype)
                    assert status == 0, (label, err)
                    written = [line for line in out.splitlines() if "removed (stale)" not in line]
                    assert len(written) == cp, (label, out)
                    dumps = read_dumps(out_dir)
                    assert sorted(dumps) == [f"rank_{r}.h5" for r in range(cp)], label
                    padded = export.padded_length(cp, cpparity_dump.LAYOUT_CHUNKS_PER_RANK[layout])
                    logits = np.full((B, padded, V), np.nan)
                    flat = {name: np.full(shape, np.nan).reshape(-1)
                            for name, shape in PARAMETER_SHAPES.items()}
                    for rank in range(cp):
                        dump = dumps[f"rank_{rank}.h5"]
                        assert dump["attrs"]["rank"] == rank and dump["attrs"]["cp"] == cp
                        indices = dump["token_indices"][0]
                        assert np.array_equal(indices, export.token_indices(layout, cp, rank))
                        logits[:, indices] = dump["logits"]
                        assert dump["loss"] == np.float32(reference.loss), label
                        for name, (offset, values) in dump["slices"].items():
                            assert np.isnan(flat[name][offset:offset + len(values)]).all()
                            flat[name][offset:offset + len(values)] = values
                        for name, values in dump["gradients"].items():
                            assert np.array_equal(values, reference.grads[name].astype(np.float32))
                    tolerance = 2**-8 if dtype == "bf16" else 2**-23
                    error = np.abs(logits[:, :S] - reference.logits)
                    assert (error <= tolerance * np.abs(reference.logits)).all(), label
                    assert (logits[:, S:] == 0).all(), label
                    if gradients == "slices":
                        for name, values in flat.items():
                            expected = reference.grads[name].astype(np.float32).reshape(-1)
                            assert np.array_equal(values, expected), (label, name)


def test_make_dumps_wrong(folder, export):
    reference = export.reference
    status, out, err, out_dir = run_make_dumps(folder, "--cp", "2", "--wrong",
                                               "logits-rows-swapped")
    assert status == 0 and "swapped" in out.splitlines()[1], (out, err)
    dumps = read_dumps(out_dir)
    rows = dumps["rank_1.h5"]["logits"][0]
    expected = reference.logits[0, 3:6].astype(np.float32)
    assert np.array_equal(rows[[1, 0, 2]], expected), rows

    status, out, err, out_dir = run_make_dumps(folder, "--cp", "2", "--wrong",
                                               "zigzag-second-chunk-reversed")
    assert status == 0, err
    dumps = read_dumps(out_dir)
    assert dumps["rank_0.h5"]["token_indices"][0].tolist() == [6, 7, 0, 1]
    assert np.array_equal(dumps["rank_0.h5"]["logits"][:, 0:2],
                          reference.logits[:, 0:2].astype(np.float32))

    status, out, err, out_dir = run_make_dumps(folder, "--cp", "2", "--wrong",
                                               "gradient-not-reduced")
    assert status == 2 and "q_proj" in err, (status, err)  # the fake export has no q_proj

    status, out, err, out_dir = run_make_dumps(folder, "--cp", "3", "--wrong",
                                               "loss-mean-of-means")
    assert status == 0, err
    for dump in read_dumps(out_dir).values():
        assert dump["loss"] == np.float32(np.float32(reference.loss) * 1.05)

    status, out, err, out_dir = run_make_dumps(folder, "--cp", "2", "--wrong", "logits-noise")
    assert status == 0, err
    dumps = read_dumps(out_dir)
    clean = reference.logits[:, 0:3].astype(np.float32)
    noisy = dumps["rank_0.h5"]["logits"]
    relative = np.linalg.norm(noisy - clean) / np.linalg.norm(clean)
    assert 3e-3 < relative < 3e-2, relative
    assert np.array_equal(dumps["rank_1.h5"]["logits"], reference.logits[:, 3:6].astype(np.float32))

    # last: replaces export.h5 with one that has a q_proj
    q_proj = "model.layers.0.self_attn.q_proj.weight"
    write_fake_export(os.path.join(folder, "export.h5"),
                      parameter_shapes={**PARAMETER_SHAPES, q_proj: (4, 3)})
    q_reference = cpparity_dump.read_export(os.path.join(folder, "export.h5")).reference
    expected = q_reference.grads[q_proj].astype(np.float32)
    status, out, err, out_dir = run_make_dumps(folder, "--cp", "3", "--wrong",
                                               "gradient-not-reduced")
    assert status == 0, err
    dumps = read_dumps(out_dir)
    assert np.array_equal(dumps["rank_0.h5"]["gradients"][q_proj], expected)
    assert np.array_equal(dumps["rank_1.h5"]["gradients"][q_proj], expected / 3)
    assert np.array_equal(dumps["rank_1.h5"]["gradients"]["lm_head.weight"],
                          q_reference.grads["lm_head.weight"].astype(np.float32))
    status, out, err, out_dir = run_make_dumps(folder, "--cp", "3", "--gradients", "slices",
                                               "--wrong", "gradient-not-reduced")
    assert status == 0, err
    offset, values = read_dumps(out_dir)["rank_1.h5"]["slices"][q_proj]
    assert (offset, len(values)) == (4, 4)
    assert np.array_equal(values, expected.reshape(-1)[4:8] / 3)


def test_make_dumps_malformed(folder, export):
    expectations = {
        "missing-rank": lambda d: sorted(d) == ["rank_0.h5", "rank_1.h5"],
        "duplicate-rank": lambda d: d["rank_2.h5"]["attrs"]["rank"] == 0,
        "cp-disagree": lambda d: d["rank_2.h5"]["attrs"]["cp"] == 4,
        "wrong-digest": lambda d: d["rank_0.h5"]["attrs"]["export_digest"] == DIGEST[:-1] + "0",
        "wrong-version": lambda d: d["rank_0.h5"]["attrs"]["format_version"] == 2,
        "missing-gradient": lambda d: sorted(d["rank_0.h5"]["gradients"]) == ["model.norm.weight"],
        "extra-gradient": lambda d: "bogus" in d["rank_0.h5"]["gradients"],
        "wrong-logits-shape": lambda d: d["rank_0.h5"]["logits"].shape == (B, 2, V - 1),
        "indices-overlap": lambda d: d["rank_1.h5"]["token_indices"][:, 0].tolist() == [0, 0],
        "indices-out-of-range": lambda d: d["rank_2.h5"]["token_indices"][:, -1].tolist() == [6, 6],
        "slices-hole": lambda d: (d["rank_0.h5"]["slices"]["lm_head.weight"][1].shape == (4,)
                                  and d["rank_1.h5"]["slices"]["lm_head.weight"][0] == 5),
    }
    for name, holds in expectations.items():
        status, out, err, out_dir = run_make_dumps(folder, "--cp", "3", "--malformed", name)
        assert status == 0, (name, err)
        assert holds(read_dumps(out_dir)), (name, out)
    status, out, err, out_dir = run_make_dumps(folder, "--cp", "2", "--malformed", "not-a-dump")
    with h5py.File(os.path.join(out_dir, "rank_0.h5"), "r") as file:
        assert "format" not in file.attrs and "rank" in file.attrs
    status, out, err, out_dir = run_make_dumps(folder, "--cp", "1", "--malformed",
                                               "duplicate-rank")
    assert status == 2 and "--cp >= 2" in err, err


TESTS = [test_read_export, test_padded_length, test_token_indices_partition,
         test_token_indices_orders, test_pad_inputs, test_write_full_round_trip,
         test_write_slices_round_trip, test_write_mixed_and_2d_indices, test_write_torch_tensors,
         test_write_refusals, test_round_to_bfloat16, test_make_dumps_perfect,
         test_make_dumps_wrong, test_make_dumps_malformed]


def main():
    failures = 0
    for test in TESTS:
        with tempfile.TemporaryDirectory() as folder:
            export_path = os.path.join(folder, "export.h5")
            write_fake_export(export_path)
            try:
                test(folder, cpparity_dump.read_export(export_path))
            except Exception:
                failures += 1
                print(f"FAIL {test.__name__}")
                traceback.print_exc(file=sys.stdout)
            else:
                print(f"ok   {test.__name__}")
    print(f"{len(TESTS) - failures}/{len(TESTS)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
