"""Type stubs of recon's extension module (python/src): one layout only,
which the package ``recon`` arranges its arguments into: samples ``[C, M]``
complex128, trajectory ``[M, 3]`` float64 as (kx, ky, kz) in cycles/FOV,
matrix and FOV as (x, y, z), images flat with x fastest."""

from typing import Optional, Sequence

import numpy as np
import numpy.typing as npt

class ReconError(RuntimeError):
    """An error of recon's, with the binary's message."""

def reconstruct(
    kspace: npt.NDArray[np.complex128],
    traj: npt.NDArray[np.float64],
    matrix: Sequence[int],
    fov_mm: Sequence[float],
    maps: Optional[npt.NDArray[np.complex128]] = None,
    noise: Optional[npt.NDArray[np.complex128]] = None,
    truth: Optional[npt.NDArray[np.float64]] = None,
    anatomy: Optional[tuple[npt.NDArray[np.float64], Sequence[int], Sequence[float]]] = None,
    settings: Sequence[str] = ...,
) -> dict: ...
def read_scan(path: str, units: str = "normalized", allow_beyond_nyquist: bool = False) -> dict: ...
def write_scan(
    path: str,
    kspace: npt.NDArray[np.complex128],
    traj: npt.NDArray[np.float64],
    matrix: Sequence[int],
    fov_mm: Sequence[float],
    noise: Optional[npt.NDArray[np.complex128]] = None,
    maps: Optional[npt.NDArray[np.complex128]] = None,
    truth: Optional[npt.NDArray[np.float64]] = None,
) -> None: ...
def run(args: Sequence[str]) -> None: ...
def gpus() -> int: ...

class Operator:
    shape: tuple[int, int]
    device: str
    notes: list[str]
    double: bool
    @staticmethod
    def encoding(
        traj: npt.NDArray[np.float64],
        matrix: Sequence[int],
        fov_mm: Sequence[float],
        engine: str = "",
        toeplitz: bool = True,
    ) -> "Operator": ...
    @staticmethod
    def sense(
        traj: npt.NDArray[np.float64],
        matrix: Sequence[int],
        fov_mm: Sequence[float],
        maps: npt.NDArray[np.complex128],
        engine: str = "",
    ) -> "Operator": ...
    @staticmethod
    def prior(
        kind: str,
        matrix: Sequence[int],
        engine: str = "",
        reference: Optional[npt.NDArray[np.float64]] = None,
        eta: float = 0.2,
        fov_mm: Optional[Sequence[float]] = None,
        regulariser: str = "",
    ) -> "Operator": ...
    def apply(self, map: str, x: npt.NDArray[np.complex128]) -> npt.NDArray[np.complex128]:
        """map: "forward" (A x), "adjoint" (A^H x) or "normal" (A^H A x)."""
