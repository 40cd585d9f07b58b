# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Tests of interpreto_anisotropy.tangents.subspace.Subspace against explicit numpy / scipy computations."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
import safetensors.torch
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreto_anisotropy.errors import (
    AnisotropyError,
    DegenerateStatisticsWarning,
    InvalidInputError,
    NonFiniteError,
    ResultsStoreError,
)
from interpreto_anisotropy.tangents.subspace import Subspace

FAST = settings(max_examples=20, deadline=None)


def orthonormal(d: int, k: int, seed: int) -> np.ndarray:
    """An orthonormal (d, k) float64 basis from numpy's QR of a Gaussian draw (independent of our code)."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, k)))
    return q


def projector(basis: np.ndarray) -> np.ndarray:
    return basis @ basis.T


# --------------------------------------------------------------------------- construction and validation
def test_basis_shape_rank_chance_and_repr():
    Q = Subspace(orthonormal(20, 3, 0), name="tangent", method="pca")
    assert (Q.dim, Q.rank) == (20, 3)
    assert Q.chance == pytest.approx(3 / 20)
    assert Q.basis.dtype == torch.float64  # float64 numpy stays float64
    assert "d=20" in repr(Q) and "k=3" in repr(Q) and "tangent" in repr(Q)


@pytest.mark.parametrize(
    ("basis", "error"),
    [
        (np.ones((6, 2)), InvalidInputError),  # not orthonormal
        (2.0 * np.eye(6)[:, :2], InvalidInputError),  # orthogonal but not unit norm
        (np.eye(6)[:, 0], InvalidInputError),  # 1-D
        (np.zeros((6, 0)), InvalidInputError),  # k = 0
        (np.eye(7)[:3, :], InvalidInputError),  # k > d
        (np.full((6, 2), np.nan), NonFiniteError),
        ("not an array", InvalidInputError),
    ],
)
def test_bad_basis_raises_our_error(basis, error):
    with pytest.raises(error) as info:
        Subspace(basis)
    assert isinstance(info.value, AnisotropyError)


def test_non_orthonormal_error_says_what_to_do():
    with pytest.raises(InvalidInputError, match="from_dictionary"):
        Subspace(np.ones((6, 2)))


def test_check_false_skips_orthonormality_test():
    assert Subspace(np.ones((6, 2)), check=False).rank == 2


def test_mean_of_wrong_size_or_non_finite_raises():
    with pytest.raises(InvalidInputError):
        Subspace(orthonormal(8, 2, 0), mean=np.zeros(7))
    with pytest.raises(NonFiniteError):
        Subspace(orthonormal(8, 2, 0), mean=np.full(8, np.inf))


# --------------------------------------------------------------------------- random
def test_random_is_deterministic_orthonormal_and_seed_dependent():
    a = Subspace.random(50, 6, seed=3)
    b = Subspace.random(50, 6, seed=3)
    c = Subspace.random(50, 6, seed=4)
    assert torch.equal(a.basis, b.basis)
    assert not torch.allclose(a.basis, c.basis)
    gram = a.basis.double().T @ a.basis.double()
    assert torch.allclose(gram, torch.eye(6, dtype=torch.float64), atol=1e-6)
    assert a.basis.dtype == torch.float32 and a.method == "random" and a.info["seed"] == 3
    assert Subspace.random(50, 6, seed=3, dtype=torch.float64).basis.dtype == torch.float64


def test_random_does_not_touch_global_rng():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    Subspace.random(16, 2, seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_random_is_isotropic_on_average():
    """Haar uniformity: the average projector of many random rank-k subspaces is (k/d) I."""
    d, k, draws = 12, 3, 500
    mean_projector = sum(
        projector(Subspace.random(d, k, seed=s, dtype=torch.float64).basis.numpy()) for s in range(draws)
    )
    mean_projector /= draws
    assert np.abs(mean_projector - (k / d) * np.eye(d)).max() < 0.05  # ~4 standard errors


@pytest.mark.parametrize(("d", "k"), [(0, 0), (4, 5), (4, 0)])
def test_random_rejects_bad_sizes(d, k):
    with pytest.raises(InvalidInputError):
        Subspace.random(d, k)


# --------------------------------------------------------------------------- projections against numpy
@pytest.fixture
def fitted():
    rng = np.random.default_rng(0)
    basis = orthonormal(16, 4, 1)
    mean = rng.standard_normal(16)
    x = rng.standard_normal((30, 16)) * 3 + 1
    return Subspace(basis, mean=mean), basis, mean, x


def test_coords_against_numpy(fitted):
    Q, basis, mean, x = fitted
    np.testing.assert_allclose(Q.coords(x).numpy(), (x - mean) @ basis, atol=1e-12)
    np.testing.assert_allclose(Q.coords(x, center=False).numpy(), x @ basis, atol=1e-12)
    # Batched (..., d) input keeps its leading shape.
    assert Q.coords(x.reshape(5, 6, 16)).shape == (5, 6, 4)


def test_project_against_numpy(fitted):
    Q, basis, mean, x = fitted
    P = projector(basis)
    np.testing.assert_allclose(Q.project(x).numpy(), mean + (x - mean) @ P, atol=1e-12)
    np.testing.assert_allclose(Q.project(x, center=False).numpy(), x @ P, atol=1e-12)
    # A projection is idempotent.
    np.testing.assert_allclose(Q.project(Q.project(x)).numpy(), Q.project(x).numpy(), atol=1e-12)


def test_remove_is_never_centred(fitted):
    Q, basis, _, x = fitted
    expected = x - x @ projector(basis)
    np.testing.assert_allclose(Q.remove(x).numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(Q.remove(x).numpy() @ basis, 0.0, atol=1e-12)


def test_energy_share_against_numpy(fitted):
    Q, basis, _, x = fitted
    expected = np.linalg.norm(x @ basis) ** 2 / np.linalg.norm(x) ** 2  # never centred, even with a mean
    assert Q.energy_share(x) == pytest.approx(expected, rel=1e-12)
    assert Q.energy_share(x[0]) == pytest.approx(np.linalg.norm(x[0] @ basis) ** 2 / np.linalg.norm(x[0]) ** 2)
    assert Q.energy_share(np.zeros((3, 16))) == 0.0
    assert Q.energy_share(torch.from_numpy(x).float()) == pytest.approx(expected, rel=1e-5)  # float32 input


def test_energy_share_of_complement_sums_to_one(fitted):
    Q, _, _, x = fitted
    complement = Subspace(Q.complement_basis())
    assert Q.energy_share(x) + complement.energy_share(x) == pytest.approx(1.0, abs=1e-12)


def test_complement_basis_is_orthonormal_and_orthogonal():
    Q = Subspace(orthonormal(10, 3, 0))
    N = Q.complement_basis()
    assert N.shape == (10, 7) and N.dtype == torch.float64
    np.testing.assert_allclose((N.T @ N).numpy(), np.eye(7), atol=1e-12)
    np.testing.assert_allclose((Q.basis.T @ N).numpy(), 0.0, atol=1e-12)


def test_coords_are_differentiable():
    Q = Subspace.random(8, 2, seed=0)
    x = torch.randn(5, 8, requires_grad=True)
    Q.coords(x).pow(2).sum().backward()
    basis = Q.basis
    torch.testing.assert_close(x.grad, 2 * (x.detach() @ basis) @ basis.T)


def test_float32_input_with_float64_basis_promotes():
    Q = Subspace(orthonormal(8, 2, 0))
    x = torch.randn(3, 8)
    assert Q.coords(x).dtype == torch.float64
    assert Subspace.random(8, 2).coords(x.double()).dtype == torch.float64


@pytest.mark.parametrize("method", ["coords", "project", "remove", "energy_share"])
def test_wrong_last_dimension_raises_dimension_mismatch(method):
    Q = Subspace.random(8, 2, seed=0)
    with pytest.raises(InvalidInputError, match="R\\^8"):
        getattr(Q, method)(torch.randn(3, 9))


def test_non_finite_gradients_raise():
    Q = Subspace.random(8, 2, seed=0)
    g = torch.randn(3, 8)
    g[1, 2] = float("nan")
    with pytest.raises(NonFiniteError):
        Q.energy_share(g)


# --------------------------------------------------------------------------- energy share invariances
@FAST
@given(
    seed=st.integers(0, 10_000),
    scale=st.floats(1e-3, 1e3),
    n=st.integers(1, 20),
)
def test_energy_share_invariant_to_scale_and_row_permutation(seed, scale, n):
    rng = np.random.default_rng(seed)
    Q = Subspace(orthonormal(12, 3, seed))
    g = rng.standard_normal((n, 12))
    base = Q.energy_share(g)
    assert 0.0 <= base <= 1.0
    assert Q.energy_share(scale * g) == pytest.approx(base, rel=1e-9, abs=1e-12)
    assert Q.energy_share(g[rng.permutation(n)]) == pytest.approx(base, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-150, 1.0, 1e150, 1e200, 1e300])
def test_energy_share_of_huge_and_tiny_gradients_is_exact(scale):
    """Rows (3, 4, 0, 0) and (0, 0, 0, 12) in the span of e1, e3: (9 + 0) / (25 + 144) whatever the scale."""
    Q = Subspace(torch.eye(4, dtype=torch.float64)[:, [0, 2]])
    g = torch.tensor([[3.0, 4.0, 0.0, 0.0], [0.0, 0.0, 0.0, 12.0]], dtype=torch.float64)
    assert Q.energy_share(scale * g) == pytest.approx(9 / 169, rel=1e-14)
    assert Q.energy_share(scale * g[0]) == pytest.approx(9 / 25, rel=1e-14)


@FAST
@given(seed=st.integers(0, 10_000), exponent=st.floats(-300.0, 300.0), n=st.integers(1, 10))
def test_energy_share_invariant_to_any_float64_scale(seed, exponent, n):
    rng = np.random.default_rng(seed)
    Q = Subspace(orthonormal(12, 3, seed))
    g = rng.standard_normal((n, 12))
    assert Q.energy_share(10.0**exponent * g) == pytest.approx(Q.energy_share(g), rel=1e-12, abs=1e-15)


@FAST
@given(seed=st.integers(0, 10_000))
def test_energy_share_invariant_to_basis_rotation(seed):
    """The energy share depends on the span only: Q R for an orthogonal R gives the same value."""
    rng = np.random.default_rng(seed)
    basis = orthonormal(12, 4, seed)
    rotation = orthonormal(4, 4, seed + 1)
    g = rng.standard_normal((7, 12))
    assert Subspace(basis @ rotation).energy_share(g) == pytest.approx(Subspace(basis).energy_share(g), rel=1e-10)


# --------------------------------------------------------------------------- principal angles and overlap
@pytest.mark.parametrize(("d", "k1", "k2"), [(10, 3, 3), (10, 2, 5), (10, 5, 2), (40, 8, 8), (6, 3, 3)])
def test_principal_angles_match_scipy(d, k1, k2):
    a, b = orthonormal(d, k1, 0), orthonormal(d, k2, 1)
    ours = Subspace(a).principal_angles(Subspace(b))
    reference = np.sort(scipy.linalg.subspace_angles(a, b))  # scipy's are descending, ours ascending
    assert ours.shape == (min(k1, k2),) and ours.dtype == np.float64
    assert np.all(np.diff(ours) >= 0)
    np.testing.assert_allclose(ours, reference, atol=1e-10)


def test_principal_angles_are_accurate_near_zero():
    """Tiny angles are recovered from sines, not lost in arccos(1 - eps)."""
    a = orthonormal(30, 4, 0)
    perturbation = orthonormal(30, 4, 1) * 1e-7
    b, _ = np.linalg.qr(a + perturbation)
    ours = Subspace(a).principal_angles(Subspace(b))
    reference = np.sort(scipy.linalg.subspace_angles(a, b))
    assert reference.max() < 1e-6
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-12)
    assert Subspace(a).principal_angles(Subspace(a)).max() < 1e-7


def test_principal_angles_of_orthogonal_and_nested_subspaces():
    eye = np.eye(8)
    np.testing.assert_allclose(Subspace(eye[:, :2]).principal_angles(Subspace(eye[:, 2:5])), np.pi / 2, atol=1e-12)
    np.testing.assert_allclose(Subspace(eye[:, :2]).principal_angles(Subspace(eye[:, :5])), 0.0, atol=1e-12)


@FAST
@given(seed=st.integers(0, 10_000), k1=st.integers(1, 6), k2=st.integers(1, 6))
def test_principal_angles_symmetric_and_match_scipy(seed, k1, k2):
    a, b = Subspace(orthonormal(12, k1, seed)), Subspace(orthonormal(12, k2, seed + 7))
    ab, ba = a.principal_angles(b), b.principal_angles(a)
    np.testing.assert_allclose(ab, ba, atol=1e-12)
    reference = np.sort(scipy.linalg.subspace_angles(a.basis.numpy(), b.basis.numpy()))
    np.testing.assert_allclose(ab, reference, atol=1e-9)
    assert np.all((ab >= 0) & (ab <= np.pi / 2 + 1e-12))


def test_principal_angles_reject_different_dimensions():
    with pytest.raises(InvalidInputError):
        Subspace.random(8, 2).principal_angles(Subspace.random(9, 2))
    with pytest.raises(InvalidInputError):
        Subspace.random(8, 2).overlap(Subspace.random(9, 2))


@pytest.mark.parametrize(("k1", "k2"), [(3, 3), (2, 5), (5, 2)])
def test_overlap_against_formula_and_cosines(k1, k2):
    a, b = orthonormal(15, k1, 2), orthonormal(15, k2, 3)
    expected = np.linalg.norm(a.T @ b) ** 2 / min(k1, k2)
    ours = Subspace(a).overlap(Subspace(b))
    assert ours == pytest.approx(expected, rel=1e-12)
    # Equivalently, the mean squared cosine of the principal angles.
    assert ours == pytest.approx(np.mean(np.cos(Subspace(a).principal_angles(Subspace(b))) ** 2), rel=1e-9)


def test_overlap_extremes():
    eye = np.eye(8)
    assert Subspace(eye[:, :2]).overlap(Subspace(eye[:, :5])) == pytest.approx(1.0)
    assert Subspace(eye[:, :2]).overlap(Subspace(eye[:, 2:4])) == pytest.approx(0.0)


# --------------------------------------------------------------------------- from_dictionary
def test_from_dictionary_spans_the_dictionary():
    rng = np.random.default_rng(0)
    dictionary = rng.standard_normal((6, 20)) * rng.uniform(0.1, 10, size=(6, 1))  # atoms of varied norms
    Q = Subspace.from_dictionary(torch.from_numpy(dictionary).float())
    assert Q.rank == 6 and Q.info["dropped_rank"] == 0 and Q.info["dictionary_size"] == 6
    basis = Q.basis.double().numpy()
    np.testing.assert_allclose(basis.T @ basis, np.eye(6), atol=1e-6)
    # Projecting each atom onto the basis recovers it: the span is the dictionary's.
    recovered = dictionary @ basis @ basis.T
    np.testing.assert_allclose(recovered, dictionary, atol=1e-5 * np.abs(dictionary).max())
    np.testing.assert_allclose(np.sort(scipy.linalg.subspace_angles(basis, dictionary.T)), 0.0, atol=1e-5)


def test_from_dictionary_drops_dependent_and_dead_atoms_with_a_warning():
    rng = np.random.default_rng(1)
    atoms = rng.standard_normal((4, 20))
    dependent = atoms[0] + 2 * atoms[1]
    dictionary = np.vstack([atoms, dependent, np.zeros(20), 3 * atoms[2]])  # 7 atoms spanning 4 dimensions
    with pytest.warns(DegenerateStatisticsWarning, match=r"\b4 dimensions"):
        Q = Subspace.from_dictionary(torch.from_numpy(dictionary), name="sae", method="topk_sae", step=3)
    assert Q.rank == 4
    assert Q.info["dropped_rank"] == 3 and Q.info["dictionary_size"] == 7
    assert (Q.name, Q.method, Q.step) == ("sae", "topk_sae", 3)
    assert Q.basis.dtype == torch.float64  # a float64 dictionary gives a float64 basis
    basis = Q.basis.numpy()
    np.testing.assert_allclose(dictionary @ basis @ basis.T, dictionary, atol=1e-10)


def test_from_dictionary_nearly_dependent_atoms_follow_rtol():
    rng = np.random.default_rng(2)
    atoms = rng.standard_normal((3, 10))
    nearly = atoms[0] + 1e-6 * rng.standard_normal(10)
    dictionary = torch.from_numpy(np.vstack([atoms, nearly]))
    with pytest.warns(DegenerateStatisticsWarning):
        assert Subspace.from_dictionary(dictionary).rank == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Subspace.from_dictionary(dictionary, rtol=1e-9).rank == 4


def test_from_dictionary_keeps_the_mean_and_accepts_numpy():
    mean = np.arange(10.0)
    Q = Subspace.from_dictionary(np.random.default_rng(0).standard_normal((3, 10)), mean=mean)
    np.testing.assert_allclose(Q.mean.numpy(), mean)


def test_from_dictionary_of_zeros_raises():
    with pytest.raises(InvalidInputError, match="zero"):
        Subspace.from_dictionary(torch.zeros(3, 10))
    with pytest.raises(InvalidInputError):
        Subspace.from_dictionary(torch.zeros(10))


# --------------------------------------------------------------------------- persistence
def test_save_load_round_trip_keeps_tensors_and_metadata(tmp_path):
    Q = Subspace(
        orthonormal(12, 3, 0),
        mean=np.linspace(-1, 1, 12),
        name="tangent",
        method="pca",
        split_point="gpt_neox.layers.1",
        step=128,
        info={"dropped_rank": 0, "fit_steps": [0, 64, 128]},
    )
    path = Q.save(tmp_path / "sub" / "tangent")  # suffix added, parents created
    assert path.name == "tangent.safetensors" and path.exists()
    assert not list(path.parent.glob("*.tmp"))
    loaded = Subspace.load(path)
    assert torch.equal(loaded.basis, Q.basis) and torch.equal(loaded.mean, Q.mean)
    assert loaded.metadata() == Q.metadata()
    assert (loaded.name, loaded.method, loaded.split_point, loaded.step) == (
        "tangent",
        "pca",
        "gpt_neox.layers.1",
        128,
    )
    assert loaded.info == {"dropped_rank": 0, "fit_steps": [0, 64, 128]}
    # Loading by the path without suffix works too.
    assert torch.equal(Subspace.load(tmp_path / "sub" / "tangent").basis, Q.basis)
    json.dumps(loaded.metadata())


def test_save_load_without_mean_and_in_float32(tmp_path):
    Q = Subspace.random(9, 2, seed=5)
    loaded = Subspace.load(Q.save(tmp_path / "random.safetensors"))
    assert loaded.mean is None and loaded.basis.dtype == torch.float32
    assert torch.equal(loaded.basis, Q.basis) and loaded.info == {"seed": 5}


def test_load_missing_file_raises(tmp_path):
    with pytest.raises(ResultsStoreError, match=re.escape(str(tmp_path / "nothing.safetensors"))) as error:
        Subspace.load(tmp_path / "nothing.safetensors")
    assert isinstance(error.value, OSError)  # still caught by `except OSError`


def _write_broken_subspace(path, kind: str) -> None:
    """A file at `path` that is not a subspace written by `Subspace.save`, broken in the way `kind` says."""
    basis = torch.eye(3)[:, :2].contiguous()
    if kind == "not safetensors":
        path.write_text("a text file, not safetensors")
    elif kind == "truncated":
        path.write_bytes(Subspace(basis).save(path).read_bytes()[:-10])
    elif kind == "no basis":
        safetensors.torch.save_file({"weights": basis}, str(path))
    elif kind == "garbage metadata":
        safetensors.torch.save_file({"basis": basis}, str(path), metadata={"interpreto_anisotropy": "{not json"})
    elif kind == "metadata not an object":
        safetensors.torch.save_file({"basis": basis}, str(path), metadata={"interpreto_anisotropy": "[1, 2]"})
    elif kind == "not orthonormal":
        safetensors.torch.save_file({"basis": 2 * basis}, str(path))
    elif kind == "a folder":
        path.mkdir()


BROKEN_FILES = {
    "not safetensors": r"Subspace\.save",
    "truncated": r"Subspace\.save",
    "no basis": r"'basis'.*\['weights'\]",
    "garbage metadata": r"metadata.*Subspace\.save",
    "metadata not an object": "metadata.*'info'",
    "not orthonormal": "orthonormal.*from_dictionary",
    "a folder": r"Subspace\.save",
}


@pytest.mark.parametrize("kind", sorted(BROKEN_FILES))
def test_load_of_a_broken_file_is_our_error_naming_it(tmp_path, kind):
    path = tmp_path / "broken.safetensors"
    _write_broken_subspace(path, kind)
    with pytest.raises(ResultsStoreError, match=rf"{re.escape(str(path))}.*{BROKEN_FILES[kind]}") as error:
        Subspace.load(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_subspace_round_trips(tmp_path, dtype):
    Q = Subspace.random(256, 32, seed=0).to(dtype=dtype)
    assert Subspace(Q.basis).basis.dtype == dtype  # accepted by the constructor's check
    loaded = Subspace.load(Q.save(tmp_path / "half.safetensors"))
    assert loaded.basis.dtype == dtype and torch.equal(loaded.basis, Q.basis)
    g = torch.randn(5, 256, dtype=torch.float64)
    assert loaded.energy_share(g) == pytest.approx(Q.energy_share(g), rel=1e-12)


def test_half_precision_check_still_refuses_a_basis_off_by_more_than_rounding():
    skewed = torch.eye(8)[:, :2].clone()
    skewed[0, 1] = 0.05  # |Q^T Q - I| = 0.05, far above bfloat16's 2 eps = 0.016
    with pytest.raises(InvalidInputError, match="from_dictionary"):
        Subspace(skewed.to(torch.bfloat16))


def test_to_copies_with_metadata():
    Q = Subspace(orthonormal(6, 2, 0), mean=np.ones(6), name="t", step=1)
    R = Q.to(dtype=torch.float32)
    assert R.basis.dtype == torch.float32 and R.mean.dtype == torch.float32
    assert (R.name, R.step) == ("t", 1) and Q.basis.dtype == torch.float64
