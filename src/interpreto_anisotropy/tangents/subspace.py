# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Low-rank linear subspaces of a split point's hidden space: an orthonormal basis Q (d, k) and an optional mean."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from safetensors import SafetensorError, safe_open
from safetensors.torch import save

from ..commons.files import parse_json, write_atomically
from ..commons.tensors import as_float_tensor, scaled_by_power_of_two
from ..errors import AnisotropyError, DegenerateStatisticsWarning, InvalidInputError, ResultsStoreError
from ..reading.split_point import check_call

__all__ = ["Subspace"]

_ORTHONORMALITY_TOLERANCE = 1e-4
_METADATA_KEYS = ("name", "method", "split_point", "step", "call")


def haar_orthonormal(draws: Float[torch.Tensor, "*n d k"]) -> Float[torch.Tensor, "*n d k"]:
    """QR of each Gaussian draw, with the sign fix that makes its basis Haar-uniform (and unique for the draw)."""
    bases, triangular = torch.linalg.qr(draws)
    return bases * torch.sign(torch.diagonal(triangular, dim1=-2, dim2=-1)).unsqueeze(-2)


@dataclass
class Subspace:
    """An orthonormal basis of a k-dimensional subspace of R^d, with an optional mean.

    Args:
        basis: Orthonormal columns, shape (d, k), checked to within 1e-4 (2 eps in half precision) unless `check=False`.
        mean: Optional centre (d,) of the fitted activations, for `coords` and `project`; gradients are never centred.
        name: A short label ("tangent", "control-3", ...).
        method: How the subspace was obtained ("pca", "semi_nmf", "random", ...).
        split_point: The split point (module path) whose hidden space this lives in.
        step: The training step of the checkpoint it was fitted on, if any.
        info: Free JSON-ready metadata (e.g. the rank dropped by `from_dictionary`).
        call: The call of the split-point module it was fitted at ("first", "last" or an index), or None.

    Raises:
        InvalidInputError: A basis not (d, k) with 1 <= k <= d or not orthonormal, a mean not (d,), or a bad `call`.
        NonFiniteError: If the basis or mean holds NaN or infinity.

    Examples:
        >>> import interpreto_anisotropy as ia
        >>> Q = ia.Subspace.random(64, 4, seed=0)
        >>> Q.dim, Q.rank
        (64, 4)
    """

    basis: Float[torch.Tensor, "d k"]
    mean: Float[torch.Tensor, " d"] | None = None
    name: str | None = None
    method: str | None = None
    split_point: str | None = None
    step: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    call: str | int | None = None
    check: bool = field(default=True, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.basis = as_float_tensor(self.basis, name="basis")
        self.call = check_call(self.call)
        d, k = self.basis.shape
        if k < 1 or k > d:
            raise InvalidInputError(f"A subspace basis must have shape (d, k) with 1 <= k <= d, got {(d, k)}.")
        if self.mean is not None:
            self.mean = as_float_tensor(self.mean, name="mean", ndim=1).to(self.basis.device)
            if self.mean.shape[0] != d:
                raise InvalidInputError(f"mean has size {self.mean.shape[0]} but the basis lives in R^{d}.")
        if not self.check:
            return
        gram = self.basis.T.double() @ self.basis.double()
        error = (gram - torch.eye(k, dtype=torch.float64, device=gram.device)).abs().max().item()
        # 1e-4, or 2 eps for half precision: rounding an orthonormal basis moves each |Q^T Q - I| entry by <= eps
        if error > max(_ORTHONORMALITY_TOLERANCE, 2 * torch.finfo(self.basis.dtype).eps):
            raise InvalidInputError(f"basis columns are not orthonormal ({error:.2e}): use Subspace.from_dictionary.")

    @property
    def dim(self) -> int:
        """The ambient dimension d."""
        return int(self.basis.shape[0])

    @property
    def rank(self) -> int:
        """The subspace dimension k."""
        return int(self.basis.shape[1])

    @property
    def device(self) -> torch.device:
        """The device the basis lives on."""
        return self.basis.device

    @property
    def chance(self) -> float:
        """k / d: the expected energy share of a uniformly random k-dimensional subspace."""
        return self.rank / self.dim

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> Subspace:
        """Return a copy on another device and/or dtype (metadata kept)."""
        mean = None if self.mean is None else self.mean.to(device=device, dtype=dtype)
        return self.replace(basis=self.basis.to(device=device, dtype=dtype), mean=mean)

    def replace(self, **changes: Any) -> Subspace:
        """A copy with some fields changed (name, method, split_point, step, call, info, basis, mean); self is unchanged.

        Examples:
            >>> Q = Subspace.random(8, 2, seed=0)
            >>> Q.replace(name="early", step=30).name, Q.name  # Q itself keeps no name
            ('early', None)
        """
        return dataclasses.replace(self, **{"info": dict(self.info), "check": False, **changes})

    def _check_input(self, x: Any, name: str) -> torch.Tensor:
        x = as_float_tensor(x, name=name, ndim=None)
        if x.dim() == 0 or x.shape[-1] != self.dim:
            raise InvalidInputError(f"{name} has shape {tuple(x.shape)} but this subspace lives in R^{self.dim}.")
        return x

    def _basis_for(self, x: torch.Tensor) -> torch.Tensor:
        return self.basis.to(device=x.device, dtype=torch.promote_types(x.dtype, self.basis.dtype))

    def coords(self, x: Float[torch.Tensor, "... d"], *, center: bool = True) -> Float[torch.Tensor, "... k"]:
        """Coordinates (..., k) of x (..., d), differentiable: (x - mean) Q, or x Q when `center=False` or no mean."""
        x = self._check_input(x, "x")
        if center and self.mean is not None:
            x = x - self.mean.to(device=x.device, dtype=x.dtype)
        basis = self._basis_for(x)
        return x.to(basis.dtype) @ basis

    def project(self, x: Float[torch.Tensor, "... d"], *, center: bool = True) -> Float[torch.Tensor, "... d"]:
        """Orthogonal projection (..., d): `mean + (x - mean) Q Q^T`, or `x Q Q^T` when `center=False` or no mean."""
        coords = self.coords(x, center=center)
        projected = coords @ self._basis_for(coords).T
        if center and self.mean is not None:
            projected = projected + self.mean.to(device=projected.device, dtype=projected.dtype)
        return projected

    def remove(self, x: Float[torch.Tensor, "... d"]) -> Float[torch.Tensor, "... d"]:
        """The component orthogonal to the subspace: x - x Q Q^T (never centred). Shape (..., d)."""
        x = self._check_input(x, "x")
        basis = self._basis_for(x)
        x = x.to(basis.dtype)
        return x - (x @ basis) @ basis.T

    def energy_share(self, g: Float[torch.Tensor, "n d"]) -> float:
        """Share of the squared Frobenius norm held by the subspace: ||G Q||_F^2 / ||G||_F^2.

        Not centred; float64 on G scaled by a power of two (`scaled_by_power_of_two`), so any c G gives G's share.

        Args:
            g: Gradients (or any vectors), shape (n, d) or (d,).

        Returns:
            A float in [0, 1]; 0.0 by convention when G is all zeros.

        Examples:
            >>> Q = Subspace(torch.eye(3)[:, :1])
            >>> g = torch.tensor([[3.0, 4.0, 0.0]], dtype=torch.float64)
            >>> round(Q.energy_share(g), 12), round(Q.energy_share(1e200 * g), 12), round(Q.energy_share(1e-200 * g), 12)
            (0.36, 0.36, 0.36)
        """
        g = scaled_by_power_of_two(self._check_input(g, "g").double())
        total = (g * g).sum()
        if total == 0:
            return 0.0
        inside = (g @ self.basis.to(device=g.device, dtype=torch.float64)).pow(2).sum()
        return float(inside / total)

    def complement_basis(self) -> Float[torch.Tensor, "d d_minus_k"]:
        """An orthonormal basis of the orthogonal complement, shape (d, d - k), float64."""
        full, _ = torch.linalg.qr(self.basis.double(), mode="complete")
        return full[:, self.rank :]

    def principal_angles(self, other: Subspace) -> np.ndarray:
        """The min(k1, k2) principal angles (float64 radians, ascending) to another subspace of the same d: from cosines
        (svd of Q1^T Q2) and, for small angles, sines, as `scipy.linalg.subspace_angles` does without re-orthonormalising
        the bases."""
        a, b = self._pair(other)
        if a.shape[1] < b.shape[1]:
            a, b = b, a
        # b has the fewer columns, so both lists have k_b values; sorted this way they pair up.
        cosines = np.sort(torch.linalg.svdvals(a.T @ b).clamp(0.0, 1.0).numpy())[::-1]
        sines = np.sort(torch.linalg.svdvals(b - a @ (a.T @ b)).clamp(0.0, 1.0).numpy())
        return np.sort(np.where(cosines > math.sqrt(0.5), np.arcsin(sines), np.arccos(cosines)))

    def overlap(self, other: Subspace) -> float:
        """Normalised overlap ||Q1^T Q2||_F^2 / min(k1, k2): 1 when one contains the other, 0 when orthogonal."""
        a, b = self._pair(other)
        return float((a.T @ b).pow(2).sum() / min(self.rank, other.rank))

    def _pair(self, other: Subspace) -> tuple[torch.Tensor, torch.Tensor]:
        """Both bases, float64 on the CPU, once they live in the same R^d."""
        if other.dim != self.dim:
            raise InvalidInputError(f"Cannot compare subspaces of R^{self.dim} and R^{other.dim}.")
        return self.basis.double().cpu(), other.basis.double().cpu()

    @classmethod
    def random(
        cls, d: int, k: int, *, seed: int = 0, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> Subspace:
        """A uniformly random (Haar) k-dimensional subspace of R^d, deterministic for a seed.

        Examples:
            >>> Subspace.random(16, 3, seed=1).rank
            3
        """
        if not (isinstance(d, int) and isinstance(k, int)) or not 1 <= k <= d:
            raise InvalidInputError(f"Need integers 1 <= k <= d, got d={d}, k={k}.")
        basis = haar_orthonormal(torch.randn(d, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
        return cls(basis.to(device=device, dtype=dtype), method="random", info={"seed": seed}, check=False)

    @classmethod
    def from_dictionary(
        cls,
        dictionary: Float[torch.Tensor, "k d"],
        mean: Float[torch.Tensor, " d"] | None = None,
        *,
        rtol: float = 1e-3,
        **metadata: Any,
    ) -> Subspace:
        """Orthonormal basis of the span of a (k, d) dictionary: zero atoms dropped, dependent ones warned of.

        Args:
            dictionary: Atoms as rows, shape (k, d) (Interpreto's `get_dictionary()` layout).
            mean: Optional centre, shape (d,).
            rtol: Relative singular-value threshold (of the unit atoms) under which a direction counts as dependent.
            **metadata: name, method, split_point, step, call.

        Returns:
            A Subspace of rank r <= k spanning the dictionary's numerical span (`info["dropped_rank"]`: k - r).

        Raises:
            InvalidInputError: If the dictionary is not 2-D or all atoms are zero.

        Examples:
            >>> D = torch.randn(5, 32)
            >>> Subspace.from_dictionary(D).rank
            5
        """
        atoms = as_float_tensor(dictionary, name="dictionary").detach().double()
        norms = atoms.norm(dim=1)
        alive = norms > 0
        if not bool(alive.any()):
            raise InvalidInputError("Every dictionary atom is zero: there is no span to orthonormalise.")
        atoms = atoms[alive] / norms[alive, None]
        left, singular_values, _ = torch.linalg.svd(atoms.T, full_matrices=False)
        rank = int((singular_values > rtol * singular_values[0]).sum())
        requested = int(dictionary.shape[0])
        if rank < requested:
            message = f"The dictionary's {requested} atoms span only {rank} dimensions (rtol {rtol})."
            warnings.warn(message, DegenerateStatisticsWarning, stacklevel=2)
        info = {"dictionary_size": requested, "dropped_rank": requested - rank, **metadata.pop("info", {})}
        # Contiguous, as after a save and a load: products then round alike in a run and in its resume.
        basis = left[:, :rank].to(dtype=torch.float32 if dictionary.dtype != torch.float64 else torch.float64)
        return cls(basis.contiguous(), mean=mean, info=info, check=False, **metadata)

    def metadata(self) -> dict[str, Any]:
        """JSON-ready metadata: name, method, split point, step, call, d, k and info."""
        return {key: getattr(self, key) for key in (*_METADATA_KEYS, "dim", "rank", "info")}

    def save(self, path: str | Path) -> Path:
        """Write the subspace atomically to a `.safetensors` file (tensors + JSON metadata); returns the path."""
        return write_atomically(Path(path).with_suffix(".safetensors"), self.file_bytes())

    def file_bytes(self) -> bytes:
        """The bytes `save` writes: the `.safetensors` file of the basis, the mean (if any) and the JSON metadata."""
        tensors = {"basis": self.basis, **({} if self.mean is None else {"mean": self.mean})}
        tensors = {name: tensor.detach().contiguous().cpu() for name, tensor in tensors.items()}
        return save(tensors, metadata={"interpreto_anisotropy": json.dumps(self.metadata())})

    @classmethod
    def load(cls, path: str | Path, *, device: torch.device | str = "cpu") -> Subspace:
        """Read a subspace written by `save`, in the dtype it was saved in (float16 and bfloat16 included).

        Raises:
            ResultsStoreError: No file at `path`, or one that holds no subspace written by `save` (naming the file).

        Examples:
            >>> Subspace.load("runs/toy/sweep/reference/1.safetensors").rank  # doctest: +SKIP
            16
        """
        path = Path(path)
        if not path.exists() and path.with_suffix(".safetensors").exists():
            path = path.with_suffix(".safetensors")
        if not path.is_file():
            raise ResultsStoreError(f"No subspace file at {path}: give a .safetensors file written by Subspace.save.")
        resave = "save the subspace again with Subspace.save"
        try:
            with safe_open(str(path), framework="pt", device=str(device)) as handle:
                raw = (handle.metadata() or {}).get("interpreto_anisotropy", "{}")
                tensors = {name: handle.get_tensor(name) for name in handle.keys()}
        except (SafetensorError, OSError) as error:
            raise ResultsStoreError(f"{path} is not a readable safetensors file ({error}); {resave}.") from error
        if "basis" not in tensors:
            raise ResultsStoreError(f"{path} holds no 'basis' tensor (it has {sorted(tensors)}); {resave}.")
        meta = parse_json(raw, path, advice=f"It has malformed subspace metadata: {resave}.", finite=False)
        if not isinstance(meta, dict) or not isinstance(meta.get("info", {}), dict):
            raise ResultsStoreError(f"{path} has subspace metadata that is not a JSON object with an 'info' object.")
        kwargs = {key: meta.get(key) for key in _METADATA_KEYS}
        try:
            return cls(tensors["basis"], mean=tensors.get("mean"), info=meta.get("info", {}), **kwargs)
        except AnisotropyError as error:
            raise ResultsStoreError(f"{path} holds no valid subspace: {error}") from error

    def __repr__(self) -> str:
        label, method = f"name={self.name!r}, " * bool(self.name), f", method={self.method!r}" * bool(self.method)
        return f"Subspace({label}d={self.dim}, k={self.rank}{method}{', centred' * (self.mean is not None)})"
