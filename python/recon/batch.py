"""Many scans, one Dask task each: ``reconstruct_many(manifest, client)``
and ``python -m recon.batch MANIFEST`` (which ``recon batch MANIFEST``
runs).

A manifest is TOML. Paths are relative to it::

    config = "protocol.toml"      # optional: a config every scan starts from

    [settings]                    # optional: config keys for every scan
    solver.lambda = 0.01

    [[scan]]
    file = "scans/a.h5"           # a scan file or an ISMRMRD file
    out = "out/a"                 # its output folder
    [scan.settings]               # optional: this scan's own keys
    prior.kind = "tv"

    [[scan]]
    file = "scans/b.h5"
    out = "out/b"

Each scan is one run of recon, as ``recon FILE --out OUT`` with the
settings, in the worker's process (``recon._native.run``): the same
outputs, ``report.json`` and Q cache. Scans of one trajectory share its Q
through the cache (content-addressed, safe for concurrent writers: put it
on shared storage with ``q.dir`` or ``RECON_CACHE_DIR`` on a cluster), and
the compiled GPU kernels beside it.

A scan whose output folder holds its complete outputs (the folder's
manifest, ``.recon-outputs``, lists them and they are there) is skipped, so
an interrupted batch is finished by running it again; outputs are
committed whole, never half-written. A failed scan is reported with its
error and does not stop the others.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time
from typing import Any, Callable, Optional

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore

MANIFEST = ".recon-outputs"


@dataclasses.dataclass
class Job:
    """One scan of a manifest: its name (the output folder's), the recon
    command line that reconstructs it, and where its outputs go."""

    name: str
    file: str
    out: str
    args: list


@dataclasses.dataclass
class Result:
    name: str
    out: str
    #: "done", "skipped" (complete outputs were there) or "failed"
    status: str
    seconds: float = 0.0
    error: Optional[str] = None
    #: report.json's PSNR, when the scan holds a truth
    psnr_db: Optional[float] = None
    iterations: Optional[int] = None


def _value(v: Any) -> str:
    """A config value as ``--set`` reads it (TOML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return repr(v)


def _pairs(table: dict, prefix: str = "") -> list:
    out = []
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += _pairs(v, key + ".")
        else:
            out.append(f"{key}={_value(v)}")
    return out


class ManifestError(ValueError):
    """A manifest that cannot be read, naming the key at fault."""


def read_manifest(path) -> list:
    """The manifest's scans as jobs, every path made absolute."""
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ManifestError(f"cannot read the manifest {path}: {e.strerror}") from None
    try:
        m = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    unknown = set(m) - {"config", "settings", "scan"}
    if unknown:
        raise ManifestError(f"{path}: unknown key(s) {sorted(unknown)}: expected config, settings and [[scan]]")
    base = path.resolve().parent
    scans = m.get("scan")
    if not isinstance(scans, list) or not scans:
        raise ManifestError(f"{path}: no [[scan]] entries")
    common = _pairs(m.get("settings", {}))
    config = m.get("config")
    jobs, outs = [], set()
    for i, s in enumerate(scans):
        where = f"{path}: scan {i + 1}"
        unknown = set(s) - {"file", "out", "settings"}
        if unknown:
            raise ManifestError(f"{where}: unknown key(s) {sorted(unknown)}: expected file, out and settings")
        for key in ("file", "out"):
            if not isinstance(s.get(key), str):
                raise ManifestError(f"{where}: `{key}` is missing (a path, relative to the manifest)")
        file, out = str(base / s["file"]), str(base / s["out"])
        if out in outs:
            raise ManifestError(f"{where}: `out` {s['out']} is also another scan's output folder")
        outs.add(out)
        args = [file, "--out", out, "-q"]
        if config is not None:
            args += ["--config", str(base / config)]
        for pair in common + _pairs(s.get("settings", {})):
            args += ["--set", pair]
        jobs.append(Job(name=pathlib.Path(s["out"]).name, file=file, out=out, args=args))
    return jobs


def complete(out) -> bool:
    """Whether the output folder holds a run's complete outputs: its
    manifest lists them (report.json among them) and each is there."""
    d = pathlib.Path(out)
    try:
        names = (d / MANIFEST).read_text().split()
    except OSError:
        return False
    return "report.json" in names and all((d / n).is_file() for n in names)


def run_one(job: Job) -> Result:
    """One scan in this process (a Dask task): skipped when its outputs
    are complete, else reconstructed; an error is returned, not raised."""
    if complete(job.out):
        return Result(job.name, job.out, "skipped")
    from . import _native

    t = time.monotonic()
    try:
        _native.run(job.args)
    except Exception as e:  # noqa: BLE001 - any failure is this scan's, reported
        return Result(job.name, job.out, "failed", time.monotonic() - t, error=str(e))
    r = Result(job.name, job.out, "done", time.monotonic() - t)
    try:
        report = json.loads((pathlib.Path(job.out) / "report.json").read_text())
        r.psnr_db, r.iterations = report.get("psnr_db"), report.get("iterations")
    except (OSError, ValueError):
        pass
    return r


def _sockets() -> int:
    ids = set()
    for f in pathlib.Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/physical_package_id"):
        try:
            ids.add(f.read_text().strip())
        except OSError:
            pass
    return max(1, len(ids))


def default_cluster():
    """A local Dask cluster: one worker process per GPU, pinned to it
    (``CUDA_VISIBLE_DEVICES``), or without GPUs one per CPU socket with
    that socket's share of the cores; one task at a time per worker."""
    from distributed import Nanny, Scheduler, SpecCluster

    from . import _native

    gpus = _native.gpus()
    if gpus:
        env = [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(gpus)]
    else:
        sockets = _sockets()
        cores = max(1, (os.cpu_count() or 1) // sockets)
        env = [{"RAYON_NUM_THREADS": str(cores)} for _ in range(sockets)]
    workers = {f"recon-{i}": {"cls": Nanny, "options": {"nthreads": 1, "env": e}} for i, e in enumerate(env)}
    return SpecCluster(
        workers=workers,
        scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
        silence_logs=40,
    )


def reconstruct_many(
    manifest,
    client=None,
    *,
    progress: Optional[Callable[[Result, int, int], None]] = None,
) -> list:
    """Reconstructs every scan of ``manifest`` (a path), one Dask task per
    scan, on ``client`` (a ``distributed.Client``: for example on a
    ``dask_jobqueue.SLURMCluster``) or on :func:`default_cluster`.
    ``progress(result, done, total)`` is called as each scan ends (by
    default a line on stderr). Returns each scan's :class:`Result`, in
    the manifest's order."""
    jobs = read_manifest(manifest)
    if progress is None:
        progress = _print_progress
    own = None
    if client is None:
        from distributed import Client

        own = Client(default_cluster())
        client = own
    try:
        from distributed import as_completed

        futures = {client.submit(run_one, j, key=f"recon-{i}-{j.name}", pure=False): i for i, j in enumerate(jobs)}
        results: list = [None] * len(jobs)
        for n, f in enumerate(as_completed(futures), 1):
            i = futures[f]
            try:
                r = f.result()
            except Exception as e:  # noqa: BLE001 - a worker lost: the scan failed
                r = Result(jobs[i].name, jobs[i].out, "failed", error=f"the worker running it failed: {e}")
            results[i] = r
            progress(r, n, len(jobs))
        return results
    finally:
        if own is not None:
            cluster = own.cluster
            own.close()
            cluster.close()


def _print_progress(r: Result, done: int, total: int) -> None:
    what = {"done": f"done in {r.seconds:.1f} s", "skipped": "skipped (complete outputs there)"}.get(
        r.status, f"FAILED: {r.error}"
    )
    print(f"[{done}/{total}] {r.name}: {what}", file=sys.stderr, flush=True)


def summary(results: list) -> str:
    """The batch's summary: a line per scan, then the counts."""
    lines = []
    for r in results:
        extra = ""
        if r.status == "done":
            extra = f"{r.seconds:.1f} s" + (f", PSNR {r.psnr_db:.2f} dB" if r.psnr_db is not None else "")
        elif r.status == "failed":
            extra = r.error or ""
        lines.append(f"{r.name:24} {r.status:8} {extra}")
    counts = {s: sum(r.status == s for r in results) for s in ("done", "skipped", "failed")}
    lines.append(f"{len(results)} scans: {counts['done']} done, {counts['skipped']} skipped, {counts['failed']} failed")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="recon batch", description="Reconstructs every scan of a manifest through Dask.")
    p.add_argument("manifest", help="the manifest (TOML): see `python -m pydoc recon.batch`")
    p.add_argument("--scheduler", help="a Dask scheduler's address (default: a local cluster)")
    a = p.parse_args(argv)
    try:
        jobs = read_manifest(a.manifest)
    except ManifestError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    client = None
    if a.scheduler:
        from distributed import Client

        client = Client(a.scheduler)
    try:
        results = reconstruct_many(a.manifest, client)
    finally:
        if client is not None:
            client.close()
    print(summary(results))
    assert len(results) == len(jobs)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
