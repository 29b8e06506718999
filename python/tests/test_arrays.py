"""Arrays in and out: scan files round trip, bad input is refused with the
binary's messages, the operators are adjoint and their normal map is
F^H F."""

import pathlib

import numpy as np
import pytest

import recon
from conftest import blob, radial

RNG = np.random.default_rng(7)


def crandn(shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def test_scan_file_round_trip_3d(tmp_path):
    # (kz, ky, kx) within Nyquist of (8, 16, 16)
    coord = RNG.uniform(-1, 1, size=(5, 40, 3)) * [3.5, 7.5, 7.5]
    k = crandn((2, 5, 40))
    maps = crandn((2, 8, 16, 16))
    noise = crandn((2, 100))
    truth = blob((8, 16, 16))
    f = tmp_path / "s.h5"
    recon.write_scan(f, k, coord, (8, 16, 16), (40.0, 160.0, 160.0), noise=noise, maps=maps, truth=truth)
    s = recon.read_scan(f)
    assert s.shape == (8, 16, 16) and s.fov_mm == (40.0, 160.0, 160.0)
    # float32 on disk: the values to its rounding (relative 6e-8, here 1e-6)
    np.testing.assert_allclose(s.coord, coord.reshape(-1, 3), rtol=1e-6)
    np.testing.assert_allclose(s.kspace, k.reshape(2, -1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.maps, maps, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.noise, noise, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.truth, truth, rtol=1e-6, atol=1e-7)


def test_scan_file_round_trip_2d(tmp_path):
    coord = radial(16, 10)
    k = crandn(coord.shape[:-1])
    f = tmp_path / "s.h5"
    recon.write_scan(f, k, coord, (16, 16), 240.0)
    s = recon.read_scan(f)
    assert s.shape == (16, 16) and s.fov_mm == (240.0, 240.0)
    assert s.kspace.shape == (160,)  # one coil: no coil axis
    np.testing.assert_allclose(s.coord, coord.reshape(-1, 2), rtol=1e-6)
    np.testing.assert_allclose(s.kspace, k.reshape(-1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("precision, tol", [("f64", 1e-12), ("f32", 1e-5)])
def test_nufft_is_adjoint_and_normal_is_fhf(precision, tol):
    # <F x, y> = <x, F^H y> to the precision's rounding (f64: 1e-12; f32:
    # sums of 10^3 terms, 1e-5); F^H F by the Toeplitz product against
    # F^H (F x) to the NUFFT's tolerance (1e-6, and f32 rounding).
    coord = radial(24, 30)
    F = recon.Nufft(coord, (24, 24), 200.0, device="cpu", precision=precision)
    assert F.dtype == (np.complex128 if precision == "f64" else np.complex64)
    x, y = crandn((24, 24)), crandn(coord.shape[:-1])
    lhs, rhs = np.vdot(F.forward(x), y), np.vdot(x, F.adjoint(y))
    assert abs(lhs - rhs) / abs(lhs) < tol
    ref = F.adjoint(F.forward(x))
    assert np.abs(F.normal(x) - ref).max() / np.abs(ref).max() < 1e-5


def test_nufft_against_the_exact_sum():
    # The NUFFT (tolerance 1e-9, f64) against recon's exact engine: the
    # same F to the tolerance.
    coord = RNG.uniform(-6, 6, size=(50, 3))
    shape = (6, 12, 12)
    x = crandn(shape)
    a = recon.Nufft(coord, shape, device="cpu", precision="f64", tolerance=1e-9, toeplitz=False)
    b = recon.Nufft(coord, shape, device="cpu", precision="f64", engine="exact", toeplitz=False)
    ya, yb = a.forward(x), b.forward(x)
    assert np.linalg.norm(ya - yb) / np.linalg.norm(yb) < 1e-8


def test_scipy_linear_operator():
    sla = pytest.importorskip("scipy.sparse.linalg")
    coord = radial(16, 24)
    F = recon.Nufft(coord, (16, 16), device="cpu", precision="f64")
    A = F.linear_operator()
    x = crandn(256)
    np.testing.assert_allclose(A.matvec(x), F.forward(x.reshape(16, 16)).reshape(-1))
    np.testing.assert_allclose(A.rmatvec(A.matvec(x)), F.adjoint(F.forward(x.reshape(16, 16))).reshape(-1))
    # a user's own solver on recon's operator: CG on F^H F x = F^H y
    truth = blob((16, 16)).astype(complex)
    y = F.forward(truth)
    N = F.normal_operator()
    # 200 iterations of SciPy's CG reach the noiseless truth to 5% (the
    # NUFFT's F^H F is well conditioned on this radial sampling)
    sol, _ = sla.cg(N, F.adjoint(y).reshape(-1), maxiter=200, rtol=1e-10)
    assert np.linalg.norm(sol - truth.reshape(-1)) / np.linalg.norm(truth) < 0.05


def test_bad_arrays_are_refused_before_computing():
    coord = radial(16, 8)
    k = crandn(coord.shape[:-1])
    with pytest.raises(TypeError, match="kspace has dtype"):
        recon.reconstruct(np.array(["a"] * k.size).reshape(k.shape), coord, (16, 16))
    bad = k.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"kspace holds \(nan.*at index \(3, 4\)"):
        recon.reconstruct(bad, coord, (16, 16))
    with pytest.raises(ValueError, match="kspace has shape"):
        recon.reconstruct(k[:, :5], coord, (16, 16))
    with pytest.raises(ValueError, match=r"coord has shape .* expected \[\.\.\., 3\]"):
        recon.reconstruct(k, coord, (4, 16, 16))
    with pytest.raises(ValueError, match="maps have shape"):
        recon.reconstruct(k, coord, (16, 16), maps=crandn((2, 16, 16)))
    with pytest.raises(ValueError, match="lam"):
        recon.reconstruct(k, coord, (16, 16), lam=-1.0)


def test_recon_errors_carry_the_binary_messages(tmp_path):
    coord = radial(16, 8) * 4  # |k| to 32: beyond Nyquist (8) for 16
    k = crandn(coord.shape[:-1])
    with pytest.raises(recon.ReconError, match="beyond Nyquist"):
        recon.reconstruct(k, coord, (16, 16), device="cpu")
    # the binary's setting lets them through (a dict's bool as --set writes it)
    _, info = recon.reconstruct(
        k, coord, (16, 16), device="cpu", lam=0.01, iterations=2, settings={"scan.allow_beyond_nyquist": True}
    )
    assert info.iterations == 2
    with pytest.raises(recon.ReconError, match="solver.iterations"):
        recon.reconstruct(k / 4, coord / 4, (16, 16), device="cpu", iterations=0)
    with pytest.raises(recon.ReconError, match="missing.h5"):
        recon.read_scan(tmp_path / "missing.h5")


def test_sense_is_the_stack_of_f_after_each_map():
    # E x = [F (S_1 x); F (S_2 x)]; <E x, y> = <x, E^H y> (f64 rounding);
    # E^H E by the Toeplitz product against E^H (E x) (tolerance 1e-6).
    coord = radial(16, 20)
    maps = crandn((2, 16, 16))
    E = recon.Sense(coord, maps, 200.0, device="cpu", precision="f64")
    F = recon.Nufft(coord, (16, 16), 200.0, device="cpu", precision="f64")
    assert E.oshape == (2,) + coord.shape[:-1]
    x, y = crandn((16, 16)), crandn(E.oshape)
    ex = E.forward(x)
    for c in range(2):
        np.testing.assert_allclose(ex[c], F.forward(maps[c] * x), rtol=1e-10, atol=1e-10)
    assert abs(np.vdot(ex, y) - np.vdot(x, E.adjoint(y))) / abs(np.vdot(ex, y)) < 1e-12
    ref = E.adjoint(ex)
    assert np.abs(E.normal(x) - ref).max() / np.abs(ref).max() < 1e-5


def test_prior_operators_against_closed_forms():
    g = recon.Gradient((4, 6, 8), device="cpu", precision="f64")
    z, y, x = np.meshgrid(np.arange(4), np.arange(6), np.arange(8), indexing="ij")
    d = g.forward((2 * x + 3 * y + 5 * z).astype(complex))
    # forward differences of a ramp: its slopes, 0 at each far edge
    np.testing.assert_allclose(d[0][:, :, :-1], 2)
    np.testing.assert_allclose(d[0][:, :, -1], 0)
    np.testing.assert_allclose(d[1][:, :-1, :], 3)
    np.testing.assert_allclose(d[2][:-1], 5)
    v, w = crandn((4, 6, 8)), crandn((3, 4, 6, 8))
    assert abs(np.vdot(g.forward(v), w) - np.vdot(v, g.adjoint(w))) < 1e-10 * abs(np.vdot(v, g.adjoint(w)))
    # the wavelet transform is orthonormal: W^H W = I, |W x| = |x|
    wv = recon.Wavelet((8, 16, 16), device="cpu", precision="f64")
    v = crandn((8, 16, 16))
    np.testing.assert_allclose(wv.adjoint(wv.forward(v)), v, atol=1e-12)
    assert abs(np.linalg.norm(wv.forward(v)) - np.linalg.norm(v)) < 1e-10 * np.linalg.norm(v)


def test_auto_says_why_it_runs_on_the_cpu():
    if recon._native.gpus() > 0:
        pytest.skip("a GPU is usable here: auto takes it, no fallback to check")
    with pytest.warns(RuntimeWarning, match="device auto: no usable GPU"):
        F = recon.Nufft(radial(8, 4), (8, 8))
    assert F.device.startswith("CPU")


def test_read_ismrmrd_fixtures():
    from conftest import REPO

    fixtures = REPO / "tests" / "fixtures"
    s = recon.read_ismrmrd(fixtures / "test-small-3coils.ismrmrd.h5")
    assert s.kspace.ndim == 2 and s.kspace.shape[0] == 3  # [C, M]
    assert s.coord.shape == (s.kspace.shape[1], len(s.shape))
    multi = recon.read_ismrmrd(fixtures / "test-small-2contrasts.ismrmrd.h5")
    assert len(multi.parts) == 2 and "contrast" in multi.parts[1][0]
    (first, a, b), (_, c, d) = multi.parts
    assert a == 0 and b == c and d == multi.coord.shape[0]
    with pytest.raises(recon.ReconError, match="not an ISMRMRD file"):
        recon.read_ismrmrd(_scan_file())


def _scan_file():
    import tempfile

    f = pathlib.Path(tempfile.mkdtemp()) / "s.h5"
    coord = radial(8, 4)
    recon.write_scan(f, np.ones(coord.shape[:-1], complex), coord, (8, 8))
    return f


def test_directional_gradient():
    # A reference without edges weighs nothing: the gradient itself. With a
    # reference that has a step along x, P removes the image's difference
    # along x where the step is (xi = its normal there): a step image that
    # follows the reference's edge costs nothing there. Adjoint to f64
    # rounding.
    shape = (4, 6, 8)
    g = recon.Gradient(shape, device="cpu", precision="f64")
    flat = recon.DirectionalGradient(np.ones(shape), device="cpu", precision="f64")
    v = crandn(shape)
    np.testing.assert_allclose(flat.forward(v), g.forward(v), atol=1e-12)
    step = np.zeros(shape)
    step[..., 4:] = 1.0
    d = recon.DirectionalGradient(step, eta=1e-3, device="cpu", precision="f64")
    across = d.forward(step.astype(complex))[0][..., 3]  # x differences at the edge
    assert np.abs(across).max() < 1e-5, np.abs(across).max()
    assert np.abs(g.forward(step.astype(complex))[0][..., 3]).min() == 1
    w = crandn((3,) + shape)
    lhs, rhs = np.vdot(d.forward(v), w), np.vdot(v, d.adjoint(w))
    assert abs(lhs - rhs) < 1e-10 * abs(lhs)


def test_regulariser_w():
    # Uniform W is the gradient. The anatomical W of a reference with a
    # step along x weighs the difference across the step by edge_weight
    # and every other by 1; a support mask adds diagonal rows. Adjoint, and
    # its normal (the solver's W^H W kernel) is W^H W, to f64 rounding.
    shape = (16, 16)
    v = crandn(shape)
    g = recon.Gradient(shape, device="cpu", precision="f64")
    u = recon.Regulariser(shape, device="cpu", precision="f64")
    np.testing.assert_array_equal(u.forward(v), g.forward(v))
    ref = np.full(shape, 0.2)
    ref[:, 8:] = 1.0
    w = recon.Regulariser(shape, reference=ref, edge_weight=0.25, device="cpu", precision="f64")
    ramp = np.tile(np.arange(16.0), (16, 1)).astype(complex)
    dx = w.forward(ramp)[0].real
    np.testing.assert_allclose(dx[:, 7], 0.25)  # the edge between columns 7 and 8
    np.testing.assert_allclose(dx[:, :6], 1.0)
    np.testing.assert_allclose(dx[:, 9:15], 1.0)
    s = recon.Regulariser(shape, reference=ref, support_threshold=0.5, device="cpu", precision="f64")
    assert s.oshape == (4,) + shape
    support = s.forward(np.ones(shape, complex))[3].real
    np.testing.assert_allclose(support[:, :8], 1.0)  # below half the peak: outside
    np.testing.assert_allclose(support[:, 8:], 0.0)
    for op in (w, s):
        y = crandn(op.oshape)
        lhs, rhs = np.vdot(op.forward(v), y), np.vdot(v, op.adjoint(y))
        assert abs(lhs - rhs) < 1e-12 * abs(lhs)
        np.testing.assert_allclose(op.normal(v), op.adjoint(op.forward(v)), atol=1e-12)
    with pytest.raises(ValueError, match="edge_weight: only the anatomical W"):
        recon.Regulariser(shape, edge_weight=0.5, device="cpu")
    with pytest.raises(ValueError, match="reference has shape"):
        recon.Regulariser(shape, reference=ref[:8], device="cpu")
    with pytest.raises(recon.ReconError, match="edge_weight"):
        recon.Regulariser(shape, reference=ref, edge_weight=2.0, device="cpu")


def test_a_quadratic_solve_satisfies_its_normal_equations_with_w():
    # The binary's anatomical solve, run to convergence in f64, solves
    # (F^H F + lam W^H W) x = F^H D with the W made here: the operators a
    # user composes are the run's. The uniform W leaves a residual ~1e-3,
    # so the check tells the two apart.
    shape = (16, 16)
    truth = blob(shape)
    truth[:, 10:] += 0.5
    coord = radial(16, 12)
    F = recon.Nufft(coord, shape, device="cpu", precision="f64")
    y = F.forward(truth.astype(complex))
    y = y + 0.01 * np.abs(y).max() * crandn(y.shape)
    ref = np.full(shape, 0.2)
    ref[:, 10:] = 1.2
    settings = {"regulariser.kind": "anatomical", "regulariser.data_edges": False, "solver.tolerance": 1e-14}
    x, info = recon.reconstruct(
        y, coord, shape, lam=0.1, iterations=300, device="cpu", precision="f64", anatomy=(ref, None), settings=settings
    )
    assert info.relative_residual < 1e-12
    w = recon.Regulariser(shape, reference=ref, device="cpu", precision="f64")

    def residual(op):
        r = F.normal(x) + info.lam_abs * op.normal(x) - info.fhd
        return np.linalg.norm(r) / np.linalg.norm(info.fhd)

    # CG's own residual, 1e-14, plus f64 rounding of the products
    assert residual(w) < 1e-12, residual(w)
    assert residual(recon.Regulariser(shape, device="cpu", precision="f64")) > 1e-5
