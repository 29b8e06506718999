//! A run's output folder, replaced whole.
//!
//! The outputs are built in a hidden staging folder beside the target and
//! swapped in with one `renameat2(RENAME_EXCHANGE)`, so a reader sees
//! either the old set of outputs or the new one, never a mix, and no file
//! of an older run survives beside the new ones. A manifest
//! (`.recon-outputs`) lists what recon wrote there; a folder holding
//! anything else is refused before any computation, so the swap never
//! throws away a user's file.
//!
//! A folder that no rename can replace, a mount point (a container volume,
//! `-v /data/out:/out`), is detected before any computation and filled in
//! place instead: the outputs are staged in a hidden folder inside it and
//! moved in one file at a time, under the same manifest rule. The manifest
//! lists every file at every step (the old and the new ones while they are
//! exchanged), so an interrupt, which waits for the commit, leaves the new
//! set whole, and even a crash in the middle leaves a folder the next run
//! accepts and replaces.
//!
//! Where the target changes under a run (a user makes a file at its path,
//! or puts files into it), the commit refuses, keeps what the user made,
//! and leaves the new outputs in a visibly named folder beside it.
//!
//! The target's path is taken as meant: a trailing `/.` names the folder
//! itself, and a symbolic link to a folder is followed (the outputs go into
//! the folder it points to; the link stays).

use crate::atomic::{
    io, partial, probe, register, remove_any, remove_stale_partials, sync_file, unregister,
    COMMITTED, PARTIAL_PREFIX,
};
use crate::IoError;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

mod commit;
mod place;

use commit::{check_only_ours, move_in, swap};
pub use place::is_mount_point;
use place::{parent_of, refuse, resolve};

/// One output for [`OutputDir::stage_all`]: its name, and what writes it
/// at the path it is given.
pub type Staging<'a, E> = (
    String,
    Box<dyn Fn(&Path) -> Result<(), E> + Send + Sync + 'a>,
);

/// The name of the manifest of an output folder.
pub const MANIFEST: &str = ".recon-outputs";

/// How the staged outputs reach the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Staged beside the target, swapped in by one rename.
    Swap,
    /// The target is a mount point: staged inside it, moved in file by file.
    InPlace,
}

/// An output folder being built: files are written into a staging folder,
/// and [`OutputDir::commit`] moves them into place.
pub struct OutputDir {
    target: PathBuf,
    staging: PathBuf,
    mode: Commit,
    /// The files staged so far, in order: outputs may be staged from
    /// several threads (some while the run still computes).
    files: std::sync::Mutex<Vec<String>>,
    done: bool,
}

impl OutputDir {
    /// Checks that `target` can take a new set of outputs, before any
    /// computation: it is absent, empty, or a folder of earlier recon
    /// outputs (with nothing else in it); the staging folder can be written.
    /// Removes stale temporary folders of dead processes beside it.
    pub fn prepare(target: &Path) -> Result<Self, IoError> {
        let target = resolve(target)?;
        let name = target
            .file_name()
            .expect("resolve names a folder")
            .to_owned();
        let parent = parent_of(&target);
        let mut mode = Commit::Swap;
        if let Ok(m) = std::fs::symlink_metadata(&target) {
            if !m.is_dir() {
                return Err(refuse(&target, "exists and is not a folder"));
            }
            check_only_ours(&target)?;
            if is_mount_point(&target) {
                mode = Commit::InPlace;
            }
        }
        let staging = match mode {
            Commit::Swap => {
                std::fs::create_dir_all(&parent).map_err(io(&parent, "create folder"))?;
                remove_stale_partials(&parent);
                parent.join(format!(
                    "{PARTIAL_PREFIX}{}-{}",
                    std::process::id(),
                    name.to_string_lossy()
                ))
            }
            Commit::InPlace => {
                target.join(format!("{PARTIAL_PREFIX}{}-staging", std::process::id()))
            }
        };
        register(&staging);
        let out = OutputDir {
            target,
            staging,
            mode,
            files: Default::default(),
            done: false,
        };
        remove_any(&out.staging);
        let at = match mode {
            Commit::Swap => &parent,
            Commit::InPlace => &out.target,
        };
        std::fs::create_dir(&out.staging).map_err(io(at, "cannot write in the folder"))?;
        probe(&out.staging)?;
        Ok(out)
    }

    /// The folder the outputs will have (a link followed).
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// How the outputs will reach it.
    pub fn mode(&self) -> Commit {
        self.mode
    }

    /// Writes output `name`: `write` fills the file at the path it is
    /// given; the file is synced. Returns the seconds it took.
    pub fn stage<E>(&self, name: &str, write: impl FnOnce(&Path) -> Result<(), E>) -> Result<f64, E>
    where
        E: From<IoError>,
    {
        let seconds = written(&self.staging.join(name), write)?;
        self.staged(name);
        Ok(seconds)
    }

    fn staged(&self, name: &str) {
        self.files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.to_string());
    }

    /// Where output `name` is staged, for a file written in parts while the
    /// run computes: [`OutputDir::stage`] of that name finishes it (its
    /// `write` gets this path, the file begun) and syncs it. Until then it
    /// is no output: an error or an interrupt removes it with the rest.
    pub fn staged_path(&self, name: &str) -> PathBuf {
        self.staging.join(name)
    }

    /// Sends what is written of a file begun at [`OutputDir::staged_path`]
    /// to the disk now, so that its final sync has less left to do.
    pub fn sync_begun(&self, name: &str) -> Result<(), IoError> {
        sync_file(&self.staging.join(name))
    }

    /// Writes several outputs side by side on rayon's threads (no thread
    /// of their own, whose stacks and allocator arenas would count against
    /// `ulimit -v`), as [`stage`] writes one: `(name, write)` pairs.
    /// Returns each one's seconds, in their order. On an error the others
    /// still finish (their files stay in the staging folder, which a failed
    /// run removes), and the first error in their order is returned.
    ///
    /// [`stage`]: OutputDir::stage
    pub fn stage_all<'a, E>(&self, outputs: Vec<Staging<'a, E>>) -> Result<Vec<f64>, E>
    where
        E: From<IoError> + Send,
    {
        use rayon::prelude::*;
        let staging = &self.staging;
        let results: Vec<Result<f64, E>> = outputs
            .par_iter()
            .with_max_len(1)
            .map(|(name, write)| written(&staging.join(name), write))
            .collect();
        let mut seconds = Vec::with_capacity(results.len());
        for ((name, _), r) in outputs.iter().zip(results) {
            seconds.push(r?);
            self.staged(name);
        }
        Ok(seconds)
    }

    /// Writes the manifest and moves the outputs into place (one swap, or
    /// file by file into a mount point); the earlier outputs, if any, are
    /// then removed. Returns the names of the files written. If the target
    /// changed during the run (a file where the folder was, files recon did
    /// not write in it), nothing of the user's is touched, and the error
    /// names the folder where the new outputs were left.
    pub fn commit(mut self) -> Result<Vec<String>, IoError> {
        let manifest = self.staging.join(MANIFEST);
        let files = std::mem::take(self.files.get_mut().unwrap_or_else(|e| e.into_inner()));
        let list: String = files.iter().map(|f| format!("{f}\n")).collect();
        std::fs::write(&manifest, list).map_err(io(&manifest, "write"))?;
        sync_file(&manifest)?;
        sync_file(&self.staging)?;
        // Again: whatever a user put at the target during the run stays.
        let changed = match std::fs::symlink_metadata(&self.target) {
            Ok(m) if !m.is_dir() => Some(format!(
                "{} was made at the output folder's path during the run",
                if m.file_type().is_symlink() {
                    "a symbolic link"
                } else {
                    "a file"
                }
            )),
            Ok(_) => check_only_ours(&self.target).err().map(|e| match e {
                IoError::Io { source, .. } => source.to_string(),
                e => e.to_string(),
            }),
            Err(_) if self.mode == Commit::InPlace => {
                Some("the folder was removed during the run".into())
            }
            Err(_) => None,
        };
        if let Some(why) = changed {
            return Err(self.keep_aside(why));
        }
        {
            let mut registry = partial();
            match self.mode {
                Commit::Swap => swap(&mut registry, &self.staging, &self.target)?,
                Commit::InPlace => move_in(&self.staging, &self.target, &files)?,
            }
            COMMITTED.store(true, Ordering::SeqCst);
            // The staging name now holds the earlier outputs (or nothing);
            // it stays registered until removed.
        }
        self.done = true;
        remove_any(&self.staging);
        unregister(&self.staging);
        let _ = sync_file(&self.target);
        let _ = sync_file(&parent_of(&self.target));
        Ok(files)
    }

    /// Moves the staged outputs to a visible folder beside the target (or,
    /// for a mount point, inside it), and says why and where.
    fn keep_aside(&mut self, why: String) -> IoError {
        let name = self
            .target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kept_name = format!("{name}-new-outputs-{}", std::process::id());
        let kept = match self.mode {
            Commit::Swap => parent_of(&self.target).join(kept_name),
            Commit::InPlace => self.target.join(kept_name),
        };
        let _ = std::fs::remove_file(self.staging.join(MANIFEST));
        match std::fs::rename(&self.staging, &kept) {
            Ok(()) => {
                self.done = true;
                unregister(&self.staging);
                IoError::Kept {
                    target: self.target.display().to_string(),
                    why,
                    kept: kept.display().to_string(),
                }
            }
            Err(e) => refuse(
                &self.target,
                format!("{why}; it was kept, and the new outputs are lost ({e})"),
            ),
        }
    }
}

/// Writes `path` by `write` and syncs it; returns the seconds it took.
fn written<E: From<IoError>>(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<f64, E> {
    let t = std::time::Instant::now();
    write(path)?;
    sync_file(path)?;
    Ok(t.elapsed().as_secs_f64())
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if !self.done {
            remove_any(&self.staging);
            unregister(&self.staging);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn output_folders_are_replaced_whole_and_foreign_files_kept() {
        let tmp = std::env::temp_dir().join(format!("recon-outdir-{}", std::process::id()));
        let target = tmp.join("out");
        let write = |d: &OutputDir, name: &str| {
            d.stage::<IoError>(name, |p| std::fs::write(p, name).map_err(io(p, "write")))
                .unwrap()
        };
        // First set: a and b.
        let d = OutputDir::prepare(&target).unwrap();
        write(&d, "a");
        write(&d, "b");
        assert_eq!(d.commit().unwrap(), ["a", "b"]);
        assert_eq!(names(&target), [MANIFEST, "a", "b"]);
        // Second set replaces it whole: b and c, no a.
        let d = OutputDir::prepare(&target).unwrap();
        write(&d, "b");
        write(&d, "c");
        d.commit().unwrap();
        assert_eq!(names(&target), [MANIFEST, "b", "c"]);
        // A file a user puts there during a run stops the commit, and stays.
        let d = OutputDir::prepare(&target).unwrap();
        write(&d, "d");
        std::fs::write(target.join("notes.txt"), "mine").unwrap();
        let err = d.commit().unwrap_err().to_string();
        assert!(err.contains("notes.txt"), "{err}");
        assert_eq!(names(&target), [MANIFEST, "b", "c", "notes.txt"]);
        // The new outputs were set aside beside it, named so.
        let aside = format!("out-new-outputs-{}", std::process::id());
        assert_eq!(names(&tmp.join(&aside)), ["d"]);
        std::fs::remove_dir_all(tmp.join(&aside)).unwrap();
        // And from then on the folder is refused before any work.
        assert!(OutputDir::prepare(&target).is_err());
        // An abandoned build leaves nothing beside the folder.
        std::fs::remove_file(target.join("notes.txt")).unwrap();
        let d = OutputDir::prepare(&target).unwrap();
        write(&d, "e");
        drop(d);
        assert_eq!(names(&tmp), ["out"]);
        assert_eq!(names(&target), [MANIFEST, "b", "c"]);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_trailing_dot_and_a_link_name_the_folder_meant() {
        let tmp = std::env::temp_dir().join(format!("recon-outdir-dot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let stage = |target: &Path| {
            let d = OutputDir::prepare(target).unwrap();
            d.stage::<IoError>("a", |p| std::fs::write(p, "a").map_err(io(p, "write")))
                .unwrap();
            d.commit().unwrap();
        };
        // `out/.` is `out`, made or replaced like it.
        stage(&tmp.join("out/."));
        stage(&tmp.join("out/."));
        assert_eq!(names(&tmp.join("out")), [MANIFEST, "a"]);
        // A link to a folder is followed, and stays a link.
        std::fs::create_dir(tmp.join("real")).unwrap();
        std::os::unix::fs::symlink(tmp.join("real"), tmp.join("link")).unwrap();
        stage(&tmp.join("link"));
        assert!(std::fs::symlink_metadata(tmp.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(names(&tmp.join("real")), [MANIFEST, "a"]);
        // A dangling link, or one to a file, is named as a link.
        std::os::unix::fs::symlink(tmp.join("nowhere"), tmp.join("dangling")).unwrap();
        let e = OutputDir::prepare(&tmp.join("dangling"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("symbolic link") && e.contains("does not exist"),
            "{e}"
        );
        std::fs::write(tmp.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(tmp.join("file"), tmp.join("to-file")).unwrap();
        let e = OutputDir::prepare(&tmp.join("to-file"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not a folder"), "{e}");
        for bad in [".", "..", "/"] {
            assert!(OutputDir::prepare(Path::new(bad)).is_err(), "{bad}");
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_file_made_at_the_target_during_a_run_is_kept_and_the_outputs_set_aside() {
        let tmp = std::env::temp_dir().join(format!("recon-outdir-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let target = tmp.join("out");
        let d = OutputDir::prepare(&target).unwrap();
        d.stage::<IoError>("a", |p| std::fs::write(p, "new").map_err(io(p, "write")))
            .unwrap();
        std::fs::write(&target, "the user's").unwrap();
        let e = d.commit().unwrap_err();
        let kept = match &e {
            IoError::Kept { kept, .. } => PathBuf::from(kept),
            e => panic!("{e}"),
        };
        assert!(e.to_string().contains("a file was made"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "the user's");
        assert_eq!(std::fs::read_to_string(kept.join("a")).unwrap(), "new");
        assert!(kept
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("out-new-outputs-"));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
