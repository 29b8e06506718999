//! Outputs written while the run still computes.
//!
//! A run of one image has its truth once its inputs are made, its gridding
//! baseline before its problem is built (one coil) or solved, and F^H D
//! before the solve ([`pipeline::Ready`]). A thread of its own writes them
//! then into the output folder's staging area: `truth.nii` and
//! `gridding.nii` whole (synced), and `recon.h5` begun with those
//! datasets, their bytes sent to the disk. What is left when the solve
//! ends is the iterative image's files (at 256^3, about a third of the
//! outputs' bytes), which [`crate::output::write`] writes beside the rest.
//! The folder is still swapped in whole: an error or an interrupt leaves
//! nothing of these files, and an error writing one is the run's error
//! once its outputs are due.
//!
//! The values are converted as the end of the run converts them (in f64,
//! times the run's scale back to the data's units, then to float32), so
//! the files are the same either way.

use crate::arrange::{self, Arrangement};
use crate::config::Loaded;
use crate::output::{self, c32, description, magnitude, nifti_name, pair, Begun, Voxels};
use crate::pipeline::{Part, Ready};
use anyhow::{Context as _, Result};
use rayon::prelude::*;
use recon_core::Complex;
use recon_io::geometry::Geometry;
use recon_io::hdf5;
use recon_io::{Context as _, OutputDir};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::Instant;

/// What was written while the run computed, for [`crate::output::write`]
/// to finish.
#[derive(Default)]
pub struct Written {
    /// `recon.h5`, begun, with the datasets in it.
    pub h5: Option<Begun>,
    /// The seconds its datasets took (with their syncs).
    pub h5_seconds: f64,
    /// The files written whole, each with its seconds.
    pub files: Vec<(String, f64)>,
    /// The first error: the run's outputs fail with it.
    pub error: Option<anyhow::Error>,
}

/// One output's values, converted, on their way to the writer.
enum Piece {
    Truth(Vec<f32>),
    Gridding { h5: Vec<Complex<f32>>, nifti: Nifti },
    Fhd(Vec<Complex<f32>>),
}

/// A NIfTI image's values, before their layout is made.
enum Nifti {
    Real(Vec<f32>),
    Complex(Vec<[f32; 2]>),
}

/// The [`Ready`] of a run of one image: converts each part on the
/// pipeline's thread (in parallel; the end of the run would convert it
/// all the same) and hands it to the writer.
pub struct Early<'l> {
    l: &'l Loaded,
    to_writer: Mutex<Option<Sender<Piece>>>,
    /// The outputs the parts sent make: "truth", "gridding" (their NIfTI
    /// images and datasets) and "fhd" (a dataset).
    sent: Mutex<Vec<&'static str>>,
}

impl Ready for Early<'_> {
    fn ready(&self, image: usize, part: Part<'_>, back: f64) {
        debug_assert_eq!(image, 0, "the early writer takes a run of one image");
        // What `Inputs::unscale` does at the end: times `back` in f64.
        let (name, piece) = match part {
            Part::Truth(t) => (
                "truth",
                Piece::Truth(t.par_iter().map(|v| (v * back) as f32).collect()),
            ),
            Part::Gridding(g) => (
                "gridding",
                Piece::Gridding {
                    h5: g.par_iter().map(|c| c32(&(c * back))).collect(),
                    nifti: match self.l.cfg.output.complex {
                        true => Nifti::Complex(g.par_iter().map(|c| pair(&(c * back))).collect()),
                        false => {
                            Nifti::Real(g.par_iter().map(|c| magnitude(&(c * back))).collect())
                        }
                    },
                },
            ),
            Part::Fhd(f) => (
                "fhd",
                Piece::Fhd(f.par_iter().map(|c| c32(&(c * back))).collect()),
            ),
        };
        let to_writer = self.to_writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = to_writer.as_ref() {
            // A writer that stopped on an error takes no more; it returns
            // the error, which fails the outputs.
            let _ = tx.send(piece);
            lock(&self.sent).push(name);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<'l> Early<'l> {
    /// No more parts: the writer finishes what it has. Returns what it
    /// will have written, to wait for ([`Pending::wait`]).
    pub fn close<'scope>(
        self,
        writer: std::thread::ScopedJoinHandle<'scope, Written>,
    ) -> Pending<'scope> {
        lock(&self.to_writer).take();
        Pending {
            sent: std::mem::take(&mut *lock(&self.sent)),
            writer: Some(writer),
        }
    }
}

/// The writer's work once every part is sent: which outputs it makes, and
/// the writer to wait for before finishing `recon.h5`.
pub struct Pending<'scope> {
    /// As [`Early`]'s: "truth", "gridding", "fhd".
    pub sent: Vec<&'static str>,
    writer: Option<std::thread::ScopedJoinHandle<'scope, Written>>,
}

impl Pending<'_> {
    /// Nothing written early (a run of several images).
    pub fn none() -> Self {
        Pending {
            sent: Vec::new(),
            writer: None,
        }
    }

    /// Waits for the writer and returns what it wrote (nothing after the
    /// first call).
    pub fn wait(&mut self) -> Written {
        match self.writer.take() {
            Some(w) => w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => Written::default(),
        }
    }
}

/// Starts the writer of a run of one image (`l`, where it lies:
/// `geometry`, `index`) on a thread of `scope`, writing into `dir`; give
/// its handle to [`Early::close`] once the run is solved.
pub fn start<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    dir: &'env OutputDir,
    l: &'env Loaded,
    index: recon_io::geometry::Index,
    geometry: Option<Geometry>,
) -> (Early<'env>, std::thread::ScopedJoinHandle<'scope, Written>) {
    let (tx, rx) = channel();
    let writer = scope.spawn(move || {
        let arrangement = Arrangement::of(&[index]);
        let w = Writer {
            dir,
            l,
            arrangement: &arrangement,
            geometry,
        };
        w.all(rx)
    });
    let early = Early {
        l,
        to_writer: Mutex::new(Some(tx)),
        sent: Mutex::new(Vec::new()),
    };
    (early, writer)
}

/// Writes the parts of one image into the staging folder.
struct Writer<'a> {
    dir: &'a OutputDir,
    l: &'a Loaded,
    arrangement: &'a Arrangement,
    geometry: Option<Geometry>,
}

impl Writer<'_> {
    /// Every part until the pipeline closes; after an error, the rest are
    /// taken and dropped.
    fn all(&self, rx: Receiver<Piece>) -> Written {
        let mut w = Written::default();
        for piece in rx {
            if w.error.is_none() {
                if let Err(e) = self.one(piece, &mut w) {
                    w.error = Some(e);
                }
            }
        }
        w
    }

    fn one(&self, piece: Piece, w: &mut Written) -> Result<()> {
        match piece {
            Piece::Truth(t) => {
                self.dataset(w, "truth", &t)?;
                self.nifti(w, "truth", Nifti::Real(t))
            }
            Piece::Gridding { h5, nifti } => {
                self.dataset(w, "gridding", &h5)?;
                drop(h5);
                self.nifti(w, "gridding", nifti)
            }
            Piece::Fhd(f) => self.dataset(w, "fhd", &f),
        }
    }

    /// Dataset `name` of `recon.h5` (the file begun with the first), its
    /// bytes then sent to the disk.
    fn dataset<T: hdf5::H5Type>(
        &self,
        w: &mut Written,
        name: &'static str,
        values: &[T],
    ) -> Result<()> {
        let t = Instant::now();
        let path = self.dir.staged_path("recon.h5");
        let mut written = || -> Result<(), recon_io::IoError> {
            if w.h5.is_none() {
                w.h5 = Some((hdf5::File::create(&path).at(&path, "create")?, Vec::new()));
            }
            let (file, names) = w.h5.as_mut().expect("begun");
            let shape = output::image_shape(self.l, self.arrangement);
            recon_io::write_dataset(&path, file, name, &shape, values, false)?;
            names.push(name);
            file.flush().at(&path, "flush")?;
            self.dir.sync_begun("recon.h5")
        };
        written().context("writing recon.h5")?;
        w.h5_seconds += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// The NIfTI image `stem`, written whole and synced.
    fn nifti(&self, w: &mut Written, stem: &str, values: Nifti) -> Result<()> {
        let geometries = [self.geometry];
        let (grid, arrangement) = (&self.l.grid, self.arrangement);
        let voxels = match values {
            Nifti::Real(v) => Voxels::Real(arrange::nifti(grid, arrangement, &geometries, v, 1)),
            Nifti::Complex(v) => {
                Voxels::Complex(arrange::nifti(grid, arrangement, &geometries, v, 1))
            }
        };
        let name = nifti_name(self.l, stem);
        let (what, gz) = (description(self.l, stem), self.l.cfg.output.compress);
        let seconds = self.dir.stage(&name, |tmp| {
            output::write_nifti(tmp, &voxels, what, gz).with_context(|| format!("writing {name}"))
        })?;
        w.files.push((name, seconds));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{self, AtEnd, Silent};
    use std::path::Path;

    /// Runs test-small (on the CPU in f64) into `out`, its outputs written
    /// while it computes when `early`, else at its end; returns what the
    /// early writer was sent and the outcome.
    fn run(
        l: &Loaded,
        out: &Path,
        early: bool,
        before_start: impl Fn(&OutputDir),
    ) -> (Vec<&'static str>, Result<Vec<String>>) {
        let images = pipeline::split(l.clone());
        let cpu = recon_core::CpuBackend::<f64>::new();
        let dir = OutputDir::prepare(out).unwrap();
        before_start(&dir);
        let staged = std::thread::scope(|s| {
            let (done, pending) = if early {
                let (e, w) = start(s, &dir, l, images[0].0, pipeline::geometry(l));
                let done = pipeline::reconstruct_series_from(&cpu, &images, None, &e, &Silent);
                (done.unwrap(), e.close(w))
            } else {
                let done = pipeline::reconstruct_series_from(&cpu, &images, None, &AtEnd, &Silent);
                (done.unwrap(), Pending::none())
            };
            let sent = pending.sent.clone();
            let input = crate::report::InputHash::start(l);
            let staged =
                crate::run::stage_outputs(l, &done, pending, input, &dir, Vec::new(), None);
            (sent, staged)
        });
        let (sent, staged) = staged;
        (sent, staged.and_then(|_| output::commit(dir)))
    }

    fn test_small(out: &Path) -> Loaded {
        let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/test-small.toml");
        let mut l = crate::load_config(&cfg, Some(out)).unwrap();
        l.cfg.q.cache = false;
        l
    }

    #[test]
    fn files_written_while_the_run_computes_are_the_files_its_end_writes() {
        let tmp = tempfile::tempdir().unwrap();
        // Magnitudes, uncompressed; complex values, gzip-compressed.
        for (complex, compress) in [(false, false), (true, true)] {
            let mut l = test_small(tmp.path());
            (l.cfg.output.complex, l.cfg.output.compress) = (complex, compress);
            let (at_end, early) = (tmp.path().join("at-end"), tmp.path().join("early"));
            let (sent, files) = run(&l, &at_end, false, |_| {});
            assert!(sent.is_empty());
            let mut files = files.unwrap();
            let (sent, early_files) = run(&l, &early, true, |_| {});
            // The test's subject: all three parts went to the writer.
            assert_eq!(sent, ["truth", "gridding", "fhd"]);
            let mut early_files = early_files.unwrap();
            files.sort();
            early_files.sort();
            assert_eq!(files, early_files);
            let gz = if compress { ".gz" } else { "" };
            for stem in ["truth", "gridding", "recon"] {
                let name = format!("{stem}.nii{gz}");
                let (a, b) = (
                    std::fs::read(at_end.join(&name)),
                    std::fs::read(early.join(&name)),
                );
                // The same values through the same writer: the same bytes.
                assert_eq!(a.unwrap(), b.unwrap(), "{name}");
            }
            let (a, b) = (at_end.join("recon.h5"), early.join("recon.h5"));
            let (fa, fb) = (hdf5::File::open(&a).unwrap(), hdf5::File::open(&b).unwrap());
            let shape = output::image_shape(&l, &Arrangement::of(&[Default::default()]));
            let va = recon_io::read_dataset::<f32>(&a, &fa, "truth", &shape).unwrap();
            let vb = recon_io::read_dataset::<f32>(&b, &fb, "truth", &shape).unwrap();
            assert_eq!(va, vb, "truth");
            for name in ["recon", "gridding", "fhd"] {
                let va = recon_io::read_dataset::<Complex<f32>>(&a, &fa, name, &shape).unwrap();
                let vb = recon_io::read_dataset::<Complex<f32>>(&b, &fb, name, &shape).unwrap();
                assert_eq!(va, vb, "{name}");
            }
            let (pa, pb) = (
                recon_io::str_attr(&a, &fa, "axes").unwrap(),
                recon_io::str_attr(&b, &fb, "axes").unwrap(),
            );
            assert_eq!(pa, pb);
            for d in [&at_end, &early] {
                std::fs::remove_dir_all(d).unwrap();
            }
        }
    }

    #[test]
    fn an_error_writing_early_fails_the_outputs_and_leaves_no_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let l = test_small(tmp.path());
        let out = tmp.path().join("out");
        // A folder where the writer puts `truth.nii`: the end of the run
        // does not write that file again, so only the writer's error can
        // stop the run from committing a folder without it.
        let (sent, files) = run(&l, &out, true, |dir| {
            std::fs::create_dir(dir.staged_path("truth.nii")).unwrap();
        });
        assert_eq!(sent, ["truth", "gridding", "fhd"]);
        let e = format!("{:#}", files.unwrap_err());
        assert!(e.contains("writing truth.nii"), "{e}");
        assert!(!out.exists());
    }
}
