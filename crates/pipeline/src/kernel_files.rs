//! Compiled GPU kernels kept in recon's cache folder, beside the Q cache
//! (the CUDA backend's [`recon_cuda::KernelCache`]), so that a machine, or
//! a cluster whose nodes share the folder, compiles each kernel once.
//! One file per module, `kernel-KEY.cubin` (KEY: the backend's SHA-256 of
//! the module's source, options and compiler), written atomically as the
//! Q cache's files are, and holding a SHA-256 of its own contents: a torn,
//! truncated or altered file is compiled again and replaced, never loaded.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A kernel file's first bytes: the format and its version.
const MAGIC: &[u8; 16] = b"recon-cubin v1\n\0";

/// The kernel files of one folder.
#[derive(Debug, Clone)]
pub struct KernelFiles {
    dir: PathBuf,
}

impl KernelFiles {
    pub fn new(dir: &Path) -> Self {
        KernelFiles {
            dir: dir.to_path_buf(),
        }
    }

    /// The file of `key`.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("kernel-{key}.cubin"))
    }
}

/// `cubin` framed for its file: the magic, its SHA-256, the bytes.
fn framed(cubin: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + cubin.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&Sha256::digest(cubin));
    out.extend_from_slice(cubin);
    out
}

/// The bytes a kernel file frames, if it is whole and unaltered.
fn unframed(file: &[u8]) -> Option<&[u8]> {
    let rest = file.strip_prefix(MAGIC.as_slice())?;
    if rest.len() <= 32 {
        return None;
    }
    let (hash, cubin) = rest.split_at(32);
    (Sha256::digest(cubin).as_slice() == hash).then_some(cubin)
}

impl recon_cuda::KernelCache for KernelFiles {
    fn get(&self, key: &str) -> Option<Vec<u8>> {
        let file = std::fs::read(self.path(key)).ok()?;
        unframed(&file).map(<[u8]>::to_vec)
    }

    fn put(&self, key: &str, cubin: &[u8]) -> Result<(), String> {
        let path = self.path(key);
        recon_io::write_atomic(&path, |tmp| recon_io::write_bytes(tmp, &framed(cubin))).map_err(
            |e: recon_io::IoError| {
                format!(
                    "compiled GPU kernels not kept in {}: {e}",
                    self.dir.display()
                )
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use recon_cuda::KernelCache;

    #[test]
    fn a_kernel_file_returns_what_was_stored_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let files = KernelFiles::new(dir.path());
        let key = "ab".repeat(32);
        assert_eq!(files.get(&key), None, "nothing stored yet");
        let cubin: Vec<u8> = (0..4000u32).map(|i| (i * 7 % 251) as u8).collect();
        files.put(&key, &cubin).unwrap();
        assert_eq!(files.get(&key).as_deref(), Some(&cubin[..]));
        assert_eq!(files.get(&"cd".repeat(32)), None, "another key");
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![format!("kernel-{key}.cubin")]);

        // A truncated, altered or foreign file is refused.
        let path = files.path(&key);
        let whole = std::fs::read(&path).unwrap();
        for bad in [
            whole[..whole.len() - 1].to_vec(),
            {
                let mut b = whole.clone();
                let last = b.len() - 1;
                b[last] ^= 1;
                b
            },
            {
                let mut b = whole.clone();
                b[0] = b'x';
                b
            },
            whole[..MAGIC.len() + 32].to_vec(),
            Vec::new(),
        ] {
            std::fs::write(&path, &bad).unwrap();
            assert_eq!(files.get(&key), None, "{} bytes", bad.len());
        }
        // Stored again, it is whole again.
        files.put(&key, &cubin).unwrap();
        assert_eq!(files.get(&key).as_deref(), Some(&cubin[..]));
    }

    #[test]
    fn an_unwritable_folder_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the folder should be: no kernel file can be made.
        let blocked = dir.path().join("cache");
        std::fs::write(&blocked, b"a file").unwrap();
        let files = KernelFiles::new(&blocked);
        let e = files.put(&"ef".repeat(32), b"cubin").unwrap_err();
        assert!(e.contains("not kept"), "{e}");
        assert_eq!(files.get(&"ef".repeat(32)), None);
    }
}
