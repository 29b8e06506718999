"""recon from Python: iterative non-Cartesian MRI reconstruction on NumPy
arrays, built on recon's Rust crates (not a wrapper of the binary).

Conventions (SigPy's where SigPy has one):

- ``coord``: k-space coordinates in cycles per FOV (``k * FOV``; Nyquist is
  ``|k| <= n / 2``), shape ``[..., ndim]`` with the last axis in the image's
  axis order: ``(kz, ky, kx)`` for a 3-D image ``[z, y, x]``, ``(ky, kx)``
  for a 2-D image ``[y, x]``, as SigPy's ``coord``. (recon's scan files and
  command line list ``(kx, ky, kz)``: the reverse.)
- ``kspace``: complex samples of shape ``coord.shape[:-1]`` (one coil) or
  ``[C, *coord.shape[:-1]]`` (C coils).
- ``shape``: the image's shape, ``(nz, ny, nx)`` or ``(ny, nx)``; images
  come back in that shape, complex64 (``precision="f32"``, the default) or
  complex128 (``"f64"``).
- ``fov_mm``: the field of view in mm, a number or one per axis in the
  image's axis order; by default 1 mm voxels. It scales nothing but the
  voxel volume in recon's box voxel basis and the outputs' geometry.

Unlike SigPy, recon models each voxel as a uniform box (``engine.basis =
"box"``; ``settings={"engine.basis": "delta"}`` gives SigPy's point model)
and chooses lambda without a truth by default (``lam="auto"``).
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native
from ._native import ReconError

__all__ = [
    "ReconError",
    "Info",
    "Scan",
    "Linop",
    "Nufft",
    "Sense",
    "Gradient",
    "DirectionalGradient",
    "Wavelet",
    "Regulariser",
    "reconstruct",
    "read_scan",
    "write_scan",
    "read_ismrmrd",
]

log = logging.getLogger("recon")


@dataclasses.dataclass
class Info:
    """What a reconstruction did: the solver's figures, lambda and how it
    was chosen, the device, each stage's seconds and the run's messages
    (the binary's log lines)."""

    iterations: int
    relative_residual: float
    residuals: list
    lam: float
    lam_abs: float
    lam_rule: str
    lam_tried: list
    device: str
    coils: int
    noise_sigma: Optional[float]
    seconds: dict
    messages: list
    gridding: np.ndarray
    fhd: np.ndarray


@dataclasses.dataclass
class Scan:
    """A scan's arrays in this package's conventions (see the module's
    docstring), as :func:`read_scan` returns them and :func:`write_scan`
    and :func:`reconstruct` take them."""

    kspace: np.ndarray
    coord: np.ndarray
    shape: tuple
    fov_mm: tuple
    noise: Optional[np.ndarray] = None
    noise_covariance: Optional[np.ndarray] = None
    maps: Optional[np.ndarray] = None
    truth: Optional[np.ndarray] = None
    #: A proton-density reference for the anatomical prior, on its own
    #: grid: ``(image, fov_mm)``, the image in the package's axis order.
    anatomy: Optional[tuple] = None
    geometry: Optional[dict] = None
    #: For a file of several images (ISMRMRD slices, contrasts, ...): each
    #: image's description and its samples' range along the last axis.
    parts: list = dataclasses.field(default_factory=list)


Array = Any


def _notes(lines) -> None:
    """The binary's lines on its choice of device: each to the ``recon``
    logger (INFO), and a GPU that ``device="auto"`` could not use also as a
    RuntimeWarning (shown once per call site), as the binary says it."""
    for line in lines:
        log.info(line)
        if "no usable GPU" in line:
            warnings.warn(line, RuntimeWarning, stacklevel=3)


def _grid(shape: Sequence[int], fov_mm) -> tuple[list[int], list[float]]:
    """The image shape (image order) as recon's matrix (x, y, z) and FOV."""
    shape = tuple(int(n) for n in shape)
    if len(shape) not in (2, 3) or any(n < 1 for n in shape):
        raise ValueError(f"shape {shape}: expected (nz, ny, nx) or (ny, nx), each at least 1")
    if fov_mm is None:
        fov = [float(n) for n in shape]
    elif np.ndim(fov_mm) == 0:
        fov = [float(fov_mm)] * len(shape)
    else:
        fov = [float(v) for v in fov_mm]
        if len(fov) != len(shape):
            raise ValueError(f"fov_mm {fov_mm}: expected one value per image axis ({len(shape)})")
    if len(shape) == 2:
        # a 2-D image is one slice: z = 1, its thickness the voxel size
        shape, fov = (1,) + shape, [fov[1] / shape[1]] + fov
    return list(reversed(shape)), list(reversed(fov))


def _traj(coord: Array, ndim: int) -> np.ndarray:
    """SigPy-ordered coordinates as recon's [M, 3] (kx, ky, kz)."""
    c = np.asarray(coord)
    if c.dtype.kind not in "fiu":
        raise TypeError(f"coord has dtype {c.dtype}: expected real numbers")
    if c.ndim < 2 or c.shape[-1] != ndim:
        raise ValueError(
            f"coord has shape {c.shape}: expected [..., {ndim}] for a {ndim}-D image, "
            f"the last axis in the image's order ({'kz, ky, kx' if ndim == 3 else 'ky, kx'})"
        )
    c = c.reshape(-1, ndim)[:, ::-1].astype(np.float64)
    if ndim == 2:
        c = np.concatenate([c, np.zeros((len(c), 1))], axis=1)
    return np.ascontiguousarray(c)


def _complex(name: str, a: Array) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind not in "fiuc":
        raise TypeError(f"{name} has dtype {a.dtype}: expected complex (or real) numbers")
    a = a.astype(np.complex128)
    bad = ~np.isfinite(a)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} holds {a[at]} at index {at}: values must be finite")
    return a


def _samples(kspace: Array, samples_shape: tuple) -> np.ndarray:
    """kspace as [C, M]: one coil of samples_shape, or C of them."""
    k = _complex("kspace", kspace)
    if k.shape == samples_shape:
        return k.reshape(1, -1)
    if k.ndim == len(samples_shape) + 1 and k.shape[1:] == samples_shape:
        return np.ascontiguousarray(k.reshape(k.shape[0], -1))
    raise ValueError(
        f"kspace has shape {k.shape}: expected coord.shape[:-1] = {samples_shape} (one coil) "
        f"or [C, *{samples_shape}] (C coils)"
    )


def _image(v: np.ndarray, shape: Sequence[int], double: bool) -> np.ndarray:
    return v.reshape(tuple(shape)).astype(np.complex128 if double else np.complex64)


def _setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_setting(v) for v in value) + "]"
    return repr(float(value)) if isinstance(value, float) else str(value)


def reconstruct(
    kspace: Array,
    coord: Array,
    shape: Sequence[int],
    fov_mm: Union[None, float, Sequence[float]] = None,
    *,
    maps: Union[None, str, Array] = None,
    noise: Optional[Array] = None,
    prior: Optional[str] = None,
    lam: Union[str, float] = "auto",
    iterations: Optional[int] = None,
    device: str = "auto",
    precision: str = "f32",
    tolerance: Optional[float] = None,
    truth: Optional[Array] = None,
    anatomy: Optional[tuple] = None,
    settings: Optional[Mapping[str, Any]] = None,
) -> tuple[np.ndarray, Info]:
    """Reconstructs one image from its samples, as ``recon scan.h5`` would
    from a scan file holding the same arrays.

    kspace, coord, shape, fov_mm: see the module's docstring.
    maps: None (several coils: estimated, recon's default), "estimate",
        "espirit", or the coil sensitivities ``[C, *shape]``.
    noise: noise-only samples ``[C, K]`` (a noise scan), for prewhitening
        and for lambda's noise level.
    prior: "quadratic" (default), "tv", "dtv" or "wavelet".
    lam: relative lambda (a number >= 0), "auto" (the discrepancy
        principle) or "gcv".
    iterations: solver iterations (recon's default when None).
    device: "auto" (a GPU when usable, else the CPU, saying why), "cuda"
        or "cpu". precision: "f32" or "f64" (the GPU computes in f32).
    tolerance: the NUFFT's relative error (recon's default 1e-6).
    truth: the true image (``shape``, real), to report PSNR against.
    anatomy: ``(image, fov_mm)``, a proton-density reference on its own
        grid (each size even), for ``settings={"regulariser.kind":
        "anatomical"}`` (and the ``dtv`` prior), as :class:`Scan` holds it.
    settings: any other config key, as ``{"solver.tolerance": 1e-6}``
        (the binary's ``--set``).

    Returns the image (``shape``) and an :class:`Info`. Raises ValueError
    or TypeError for bad arguments and :class:`ReconError` for what the
    binary would refuse, with its message.
    """
    matrix, fov = _grid(shape, fov_mm)
    ndim = len(tuple(shape))
    c = np.asarray(coord)
    traj = _traj(c, ndim)
    data = _samples(kspace, c.shape[:-1])
    coils = data.shape[0]
    pairs = {
        "solver.lambda": lam,
        "solver.iterations": iterations,
        "prior.kind": prior,
        "engine.device": device,
        "engine.precision": precision,
        "engine.tolerance": tolerance,
    }
    given_maps = None
    if isinstance(maps, str):
        pairs["sense.maps"] = maps
    elif maps is not None:
        m = _complex("maps", maps)
        if m.shape != (coils,) + tuple(shape):
            raise ValueError(f"maps have shape {m.shape}: expected [C, *shape] = {(coils,) + tuple(shape)}")
        given_maps = np.ascontiguousarray(m.reshape(coils, -1))
        pairs["sense.maps"] = "given"
    if lam not in ("auto", "gcv"):
        if isinstance(lam, str) or not np.isfinite(lam) or lam < 0:
            raise ValueError(f"lam {lam!r}: expected a number >= 0, 'auto' or 'gcv'")
    noise_rows = None
    if noise is not None:
        n = _complex("noise", noise)
        if n.ndim != 2 or n.shape[0] != coils:
            raise ValueError(f"noise has shape {n.shape}: expected [C, K] with C = {coils}")
        noise_rows = np.ascontiguousarray(n)
    t = None
    if truth is not None:
        t = np.asarray(truth, dtype=np.float64)
        if t.shape != tuple(shape):
            raise ValueError(f"truth has shape {t.shape}: expected {tuple(shape)}")
        t = np.ascontiguousarray(t.reshape(-1))
    ref = None
    if anatomy is not None:
        a_image, a_fov = anatomy
        a = np.asarray(a_image, dtype=np.float64)
        a_matrix, a_fov = _grid(a.shape, a_fov)
        ref = (np.ascontiguousarray(a.reshape(-1)), a_matrix, a_fov)
    pairs.update(settings or {})
    sets = [f"{k}={_setting(v)}" for k, v in pairs.items() if v is not None]
    out = _native.reconstruct(data, traj, matrix, fov, given_maps, noise_rows, t, ref, sets)
    _notes(out["notes"])
    for w in out["warnings"]:
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    double = precision == "f64"
    info = Info(
        iterations=out["iterations"],
        relative_residual=out["relative_residual"],
        residuals=list(out["residuals"]),
        lam=out["lam"],
        lam_abs=out["lam_abs"],
        lam_rule=out["lam_rule"],
        lam_tried=list(out["lam_tried"]),
        device=out["device"],
        coils=out["coils"],
        noise_sigma=out["noise_sigma"],
        seconds=dict(out["seconds"]),
        messages=list(out["notes"]) + list(out["messages"]),
        gridding=_image(out["gridding"], shape, double),
        fhd=_image(out["fhd"], shape, double),
    )
    return _image(out["image"], shape, double), info


def _anatomy(a) -> tuple:
    values, (nx, ny, nz), (fx, fy, fz) = a
    if nz == 1:
        return np.asarray(values).reshape(ny, nx), (fy, fx)
    return np.asarray(values).reshape(nz, ny, nx), (fz, fy, fx)


def _scan_of(d: dict) -> Scan:
    nx, ny, nz = d["matrix"]
    fx, fy, fz = d["fov_mm"]
    traj = np.asarray(d["traj"]).reshape(-1, 3)
    c = d["coils"]
    if nz == 1:
        shape, fov, coord = (ny, nx), (fy, fx), traj[:, 1::-1]
    else:
        shape, fov, coord = (nz, ny, nx), (fz, fy, fx), traj[:, ::-1]
    kspace = np.asarray(d["data"]).reshape(c, -1)
    geometry = None
    if "position_mm" in d:
        geometry = {k: d[k] for k in ("position_mm", "read_dir", "phase_dir", "slice_dir")}
    return Scan(
        kspace=kspace[0] if c == 1 else kspace,
        coord=np.ascontiguousarray(coord),
        shape=shape,
        fov_mm=fov,
        noise=np.asarray(d["noise"]).reshape(c, -1) if "noise" in d else None,
        noise_covariance=np.asarray(d["noise_covariance"]).reshape(c, c) if "noise_covariance" in d else None,
        maps=np.asarray(d["maps"]).reshape((c,) + shape) if "maps" in d else None,
        truth=np.asarray(d["truth"]).reshape(shape) if "truth" in d else None,
        anatomy=_anatomy(d["anatomy"]) if "anatomy" in d else None,
        geometry=geometry,
        parts=list(d["parts"]),
    )


def read_scan(path, *, allow_beyond_nyquist: bool = False) -> Scan:
    """Reads a recon scan file (or an ISMRMRD file: see
    :func:`read_ismrmrd`), checked as the binary checks it."""
    return _scan_of(_native.read_scan(str(path), "normalized", allow_beyond_nyquist))


def read_ismrmrd(path, *, units: str = "normalized", allow_beyond_nyquist: bool = False) -> Scan:
    """Reads a non-Cartesian ISMRMRD file: its trajectory (``units``:
    "normalized", [-0.5, 0.5], as ISMRMRD files hold it, or
    "cycles_per_fov"), coils, noise scans and images (``Scan.parts``)."""
    d = _native.read_scan(str(path), units, allow_beyond_nyquist)
    if d["kind"] != "ismrmrd":
        raise ReconError(f"{path}: not an ISMRMRD file (a recon scan file: use read_scan)")
    return _scan_of(d)


def write_scan(
    path,
    kspace: Array,
    coord: Array,
    shape: Sequence[int],
    fov_mm: Union[None, float, Sequence[float]] = None,
    *,
    noise: Optional[Array] = None,
    maps: Optional[Array] = None,
    truth: Optional[Array] = None,
) -> None:
    """Writes a recon scan file (HDF5, version 2) of these arrays, as
    ``recon scan.h5`` reads it: atomically, after the checks a read makes."""
    matrix, fov = _grid(shape, fov_mm)
    c = np.asarray(coord)
    traj = _traj(c, len(tuple(shape)))
    data = _samples(kspace, c.shape[:-1])
    coils = data.shape[0]
    n = None if noise is None else np.ascontiguousarray(_complex("noise", noise).reshape(coils, -1))
    m = None if maps is None else np.ascontiguousarray(_complex("maps", maps).reshape(coils, -1))
    t = None if truth is None else np.ascontiguousarray(np.asarray(truth, dtype=np.float64).reshape(-1))
    _native.write_scan(str(path), data, traj, matrix, fov, n, m, t)


class Linop:
    """One of recon's linear operators on one device: ``forward``,
    ``adjoint`` and ``normal`` take and return arrays of the operator's
    input shape ``ishape`` and output shape ``oshape``, computed in its
    precision (``dtype``: complex64 in f32, complex128 in f64);
    :meth:`linear_operator` and :meth:`normal_operator` give SciPy's
    ``LinearOperator`` on flattened vectors, for a solver of your own."""

    def __init__(self, op, ishape: tuple, oshape: tuple):
        self._op = op
        self.ishape, self.oshape = tuple(ishape), tuple(oshape)
        rows, cols = op.shape
        if (rows, cols) != (int(np.prod(self.oshape)), int(np.prod(self.ishape))):
            raise ReconError(f"internal error: operator of shape {op.shape} for {self.oshape} x {self.ishape}")
        _notes(op.notes)
        self.device = op.device
        self.dtype = np.dtype(np.complex128 if op.double else np.complex64)

    def _vector(self, name: str, x: Array, shape: tuple) -> np.ndarray:
        v = _complex(name, x)
        if v.shape != shape:
            raise ValueError(f"{name} has shape {v.shape}: expected {shape}")
        return np.ascontiguousarray(v.reshape(-1))

    def forward(self, x: Array) -> np.ndarray:
        """``A x``"""
        return self._op.apply("forward", self._vector("x", x, self.ishape)).reshape(self.oshape).astype(self.dtype)

    def adjoint(self, y: Array) -> np.ndarray:
        """``A^H y``"""
        return self._op.apply("adjoint", self._vector("y", y, self.oshape)).reshape(self.ishape).astype(self.dtype)

    def normal(self, x: Array) -> np.ndarray:
        """``A^H A x`` (for F and SENSE: the Toeplitz product, as recon's
        solver applies it)."""
        return self._op.apply("normal", self._vector("x", x, self.ishape)).reshape(self.ishape).astype(self.dtype)

    def linear_operator(self):
        """A as a ``scipy.sparse.linalg.LinearOperator`` (``matvec`` A,
        ``rmatvec`` A^H) on flattened vectors."""
        from scipy.sparse.linalg import LinearOperator

        m, n = int(np.prod(self.oshape)), int(np.prod(self.ishape))
        return LinearOperator(
            (m, n),
            matvec=lambda x: self.forward(np.reshape(x, self.ishape)).reshape(-1),
            rmatvec=lambda y: self.adjoint(np.reshape(y, self.oshape)).reshape(-1),
            dtype=self.dtype,
        )

    def normal_operator(self):
        """``A^H A`` as a Hermitian ``scipy.sparse.linalg.LinearOperator``."""
        from scipy.sparse.linalg import LinearOperator

        n = int(np.prod(self.ishape))
        f = lambda x: self.normal(np.reshape(x, self.ishape)).reshape(-1)  # noqa: E731
        return LinearOperator((n, n), matvec=f, rmatvec=f, dtype=self.dtype)


def _engine(device, precision, basis="box", kind="nufft", tolerance=None) -> str:
    keys = {"device": device, "precision": precision, "basis": basis, "kind": kind, "tolerance": tolerance}
    return "\n".join(f"{k} = {_toml(v)}" for k, v in keys.items() if v is not None)


def _toml(v) -> str:
    return f'"{v}"' if isinstance(v, str) else repr(float(v))


class Nufft(Linop):
    """The encoding operator F of one trajectory: images (``shape``) to
    samples (``coord.shape[:-1]``), ``F x = phi(k) sum_r x(r) exp(-2 pi i
    k . r)`` with recon's voxel basis phi (``basis="delta"``: phi = 1, as
    SigPy). ``engine="nufft"`` to ``tolerance`` (recon's default 1e-6), or
    ``"exact"`` (direct sums). Its normal map is the Toeplitz product with
    Q (computed once, through recon's Q cache; ``toeplitz=False``: F^H F
    by its two maps)."""

    def __init__(
        self,
        coord: Array,
        shape: Sequence[int],
        fov_mm: Union[None, float, Sequence[float]] = None,
        *,
        tolerance: Optional[float] = None,
        device: str = "auto",
        precision: str = "f32",
        basis: str = "box",
        engine: str = "nufft",
        toeplitz: bool = True,
    ):
        shape = tuple(int(n) for n in shape)
        c = np.asarray(coord)
        matrix, fov = _grid(shape, fov_mm)
        text = _engine(device, precision, basis, engine, tolerance)
        op = _native.Operator.encoding(_traj(c, len(shape)), matrix, fov, text, toeplitz)
        super().__init__(op, shape, c.shape[:-1])


class Sense(Linop):
    """SENSE's operator ``E x = [F (S_1 x); ...; F (S_C x)]`` with coil
    sensitivities ``maps`` (``[C, *shape]``): images to ``[C,
    *coord.shape[:-1]]``; its normal map is recon's solver's (the Toeplitz
    product with each map folded in). Keywords as :class:`Nufft`."""

    def __init__(
        self,
        coord: Array,
        maps: Array,
        fov_mm: Union[None, float, Sequence[float]] = None,
        *,
        tolerance: Optional[float] = None,
        device: str = "auto",
        precision: str = "f32",
        basis: str = "box",
        engine: str = "nufft",
    ):
        m = _complex("maps", maps)
        shape = m.shape[1:]
        c = np.asarray(coord)
        matrix, fov = _grid(shape, fov_mm)
        text = _engine(device, precision, basis, engine, tolerance)
        rows = np.ascontiguousarray(m.reshape(m.shape[0], -1))
        op = _native.Operator.sense(_traj(c, len(shape)), matrix, fov, rows, text)
        super().__init__(op, shape, (m.shape[0],) + c.shape[:-1])


class Gradient(Linop):
    """Total variation's operator: forward differences of an image
    (``shape``, 2-D or 3-D) along each axis, ``x[i + e_a] - x[i]`` and 0
    at the far edge (a symmetric boundary), as ``[3, *shape]``: the x, y
    and z differences in turn (in 2-D the third is 0)."""

    def __init__(self, shape: Sequence[int], *, device: str = "auto", precision: str = "f32"):
        shape = tuple(int(n) for n in shape)
        matrix, _ = _grid(shape, None)
        op = _native.Operator.prior("gradient", matrix, _engine(device, precision))
        super().__init__(op, shape, (3,) + shape)


class DirectionalGradient(Linop):
    """Directional total variation's operator: :class:`Gradient` weighted
    per voxel by ``P = I - xi xi^T``, ``xi`` the real ``reference``
    image's gradient over ``sqrt(|grad r|^2 + eta^2)`` (``eta`` relative to
    its largest gradient norm, recon's ``prior.eta``), so that the image's
    gradient across the reference's edges is not penalised."""

    def __init__(self, reference: Array, *, eta: float = 0.2, device: str = "auto", precision: str = "f32"):
        r = np.asarray(reference)
        if r.dtype.kind not in "fiu":
            raise TypeError(f"reference has dtype {r.dtype}: expected real numbers")
        shape = r.shape
        matrix, _ = _grid(shape, None)
        values = np.ascontiguousarray(r.astype(np.float64).reshape(-1))
        op = _native.Operator.prior("directional", matrix, _engine(device, precision), values, float(eta))
        super().__init__(op, shape, (3,) + shape)


class Wavelet(Linop):
    """The wavelet prior's operator: the orthonormal Daubechies-2 transform
    of an image (``shape``), its coefficients in place (``shape``)."""

    def __init__(self, shape: Sequence[int], *, device: str = "auto", precision: str = "f32"):
        shape = tuple(int(n) for n in shape)
        matrix, _ = _grid(shape, None)
        op = _native.Operator.prior("wavelet", matrix, _engine(device, precision))
        super().__init__(op, shape, shape)


class Regulariser(Linop):
    """The quadratic prior's W (``prior="quadratic"``, the default: the
    penalty ``lam ||W x||^2``) on images of ``shape``: forward differences
    along x, y and z, each weighted per edge, as three fields in turn
    (``(3, *shape)``), then, with a support mask, one diagonal row per
    voxel (``(4, *shape)``). Its ``normal`` is the W^H W that recon's CG
    applies.

    Without ``reference`` every weight is 1 (``[regulariser] kind =
    "uniform"``; the same map as :class:`Gradient`). With a real
    ``reference`` image of ``shape`` (a proton-density scan already on the
    image grid, ``fov_mm`` as for :func:`reconstruct`) it is the anatomical
    W (``kind = "anatomical"``): ``edge_weight`` across the reference's
    boundaries (its gradient above ``edge_threshold`` of its largest) and 1
    elsewhere, plus ``support_weight`` rows outside ``support_threshold``
    of its peak when that is given; None keeps recon's default. It is the W
    of a run's first solve: a second pass's relaxed data edges
    (``regulariser.data_edges``) depend on the first pass's image."""

    def __init__(
        self,
        shape: Sequence[int],
        *,
        reference: Optional[Array] = None,
        fov_mm: Union[None, float, Sequence[float]] = None,
        edge_threshold: Optional[float] = None,
        edge_weight: Optional[float] = None,
        support_threshold: Optional[float] = None,
        support_weight: Optional[float] = None,
        device: str = "auto",
        precision: str = "f32",
    ):
        shape = tuple(int(n) for n in shape)
        matrix, fov = _grid(shape, fov_mm)
        keys = {
            "edge_threshold": edge_threshold,
            "edge_weight": edge_weight,
            "support_threshold": support_threshold,
            "support_weight": support_weight,
        }
        values = None
        if reference is None:
            given = [k for k, v in keys.items() if v is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only the anatomical W (a reference) has them")
        else:
            r = np.asarray(reference)
            if r.dtype.kind not in "fiu":
                raise TypeError(f"reference has dtype {r.dtype}: expected real numbers")
            if r.shape != shape:
                raise ValueError(f"reference has shape {r.shape}: expected {shape}")
            if not np.all(np.isfinite(r)):
                raise ValueError("reference holds values that are not finite")
            values = np.ascontiguousarray(r.astype(np.float64).reshape(-1))
        toml = "\n".join(f"{k} = {_toml(v)}" for k, v in keys.items() if v is not None)
        engine = _engine(device, precision)
        op = _native.Operator.prior("quadratic", matrix, engine, reference=values, fov_mm=fov, regulariser=toml)
        rows = op.shape[0] // int(np.prod(shape))
        super().__init__(op, shape, (rows,) + shape)
