"""Many scans through Dask: a local cluster of 2 workers, a bad scan that
fails alone, a re-run that skips complete outputs, an interrupted batch
finished by running it again."""

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import recon
from conftest import blob, radial

distributed = pytest.importorskip("distributed")
from recon import batch  # noqa: E402


def scans(tmp_path, count):
    coord = radial(24, 30)
    F = recon.Nufft(coord, (24, 24), 240.0, device="cpu", precision="f64")
    files = []
    for i in range(count):
        truth = blob((24, 24)) * (1 + i)
        f = tmp_path / f"scan{i}.h5"
        recon.write_scan(f, F.forward(truth), coord, (24, 24), 240.0, truth=truth)
        files.append(f.name)
    return files


def manifest(tmp_path, files, name="batch.toml"):
    text = '[settings]\nsolver.lambda = 0.01\nengine.device = "cpu"\noutput.dir = "unused"\n'
    for f in files:
        text += f'\n[[scan]]\nfile = "{f}"\nout = "out/{pathlib.Path(f).stem}"\n'
    m = tmp_path / name
    m.write_text(text)
    return m


@pytest.fixture
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as cl:
            yield cl


def test_a_batch_on_two_workers_with_a_bad_scan(tmp_path, client):
    files = scans(tmp_path, 3)
    (tmp_path / "bad.h5").write_text("not HDF5")
    m = manifest(tmp_path, files + ["bad.h5"])
    seen = []
    results = batch.reconstruct_many(m, client, progress=lambda r, n, t: seen.append((r.name, n, t)))
    assert [r.status for r in results] == ["done", "done", "done", "failed"]
    assert "bad.h5" in results[3].error
    assert sorted(n for _, n, _ in seen) == [1, 2, 3, 4] and all(t == 4 for *_, t in seen)
    for r in results[:3]:
        assert batch.complete(r.out) and r.psnr_db > 20, r
    # the two workers both took scans
    workers = {w for w in client.run(os.getpid).values()}
    assert len(workers) == 2
    # again: the complete outputs are skipped, the bad scan fails again
    again = batch.reconstruct_many(m, client, progress=lambda *a: None)
    assert [r.status for r in again] == ["skipped", "skipped", "skipped", "failed"]


def test_manifest_errors_name_the_key(tmp_path):
    m = tmp_path / "m.toml"
    m.write_text('[[scan]]\nfile = "a.h5"\n')
    with pytest.raises(batch.ManifestError, match="scan 1: `out` is missing"):
        batch.read_manifest(m)
    m.write_text('[[scan]]\nfile = "a.h5"\nout = "o"\n[[scan]]\nfile = "b.h5"\nout = "o"\n')
    with pytest.raises(batch.ManifestError, match="also another scan's output folder"):
        batch.read_manifest(m)
    m.write_text('scans = 1\n')
    with pytest.raises(batch.ManifestError, match="unknown key"):
        batch.read_manifest(m)


def test_an_interrupted_batch_is_finished_by_running_it_again(tmp_path):
    files = scans(tmp_path, 6)
    m = manifest(tmp_path, files)
    cmd = [sys.executable, "-m", "recon.batch", str(m)]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
    # killed (the driver, its scheduler and worker) once one scan is done
    for line in p.stderr:
        if line.startswith("[1/6]"):
            break
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    outs = [tmp_path / "out" / pathlib.Path(f).stem for f in files]
    finished = [batch.complete(o) for o in outs]
    assert 1 <= sum(finished) < 6, finished
    for o, done in zip(outs, finished):
        # nothing half-written: a folder is complete, or holds no outputs
        if not done and o.exists():
            assert not (o / "recon.h5").exists() and not (o / "report.json").exists()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"6 scans: {6 - sum(finished)} done, {sum(finished)} skipped, 0 failed" in run.stdout
    assert all(batch.complete(o) for o in outs)


def test_the_binary_runs_the_same_batch(tmp_path, binary):
    files = scans(tmp_path, 2)
    m = manifest(tmp_path, files)
    env = {**os.environ, "RECON_PYTHON": sys.executable}
    run = subprocess.run([str(binary), "batch", str(m)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "2 scans: 2 done, 0 skipped, 0 failed" in run.stdout
    bad = subprocess.run(
        [str(binary), "batch", str(m), "--python", str(tmp_path / "no-python")], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "cannot import with Dask" in bad.stderr
