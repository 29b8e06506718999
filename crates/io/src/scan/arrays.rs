//! A scan made in memory, checked as a read checks a file's values.

use super::{check_coils, check_maps_scale, check_nyquist, check_samples, CoilNoise, Scan};
use crate::{layout as bad, IoError};
use recon_core::Complex;
use std::path::Path;

/// A scan made in memory (a Python caller's arrays), checked as
/// [`super::read_scan`] checks a file's values: the coil count, samples present
/// and within the limit, every value finite, the trajectory spread and
/// within Nyquist (unless `allow_beyond_nyquist`), the maps' scale. The
/// shapes are the caller's to make consistent; errors name the datasets a
/// scan file would hold them in, and `name` for the file.
pub fn check_arrays(scan: &Scan, name: &str, allow_beyond_nyquist: bool) -> Result<(), IoError> {
    let path = Path::new(name);
    check_coils(path, scan.coils)?;
    check_samples(path, scan.traj.len())?;
    fn finite(path: &Path, what: &str, mut v: impl Iterator<Item = f64>) -> Result<(), IoError> {
        match v.position(|x| !x.is_finite()) {
            Some(i) => Err(bad(
                path,
                what,
                format!("holds a value that is not finite at index {i}: values must be finite"),
            )),
            None => Ok(()),
        }
    }
    let pairs = |v: &[Complex<f64>]| v.iter().flat_map(|c| [c.re, c.im]).collect::<Vec<_>>();
    finite(
        path,
        "kspace/trajectory",
        scan.traj.iter().flatten().copied(),
    )?;
    finite(path, "kspace/data", pairs(&scan.data).into_iter())?;
    if let Some(CoilNoise::Samples(v) | CoilNoise::Covariance(v)) = &scan.noise {
        finite(path, "kspace/noise", pairs(v).into_iter())?;
    }
    if let Some(maps) = &scan.maps {
        finite(path, "coils/maps", maps.iter().flat_map(|m| pairs(m)))?;
        check_maps_scale(path, maps, scan.grid.len())?;
    }
    if let Some(t) = &scan.truth {
        finite(path, "reference/truth", t.iter().copied())?;
    }
    crate::check_spread(path, "kspace/trajectory", &scan.traj)?;
    if !allow_beyond_nyquist {
        check_nyquist(path, &scan.traj, scan.grid.n)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use recon_core::Grid;

    fn scan() -> Scan {
        let traj: Vec<[f64; 3]> = (0..64)
            .map(|m| [m as f64 / 8.0 - 4.0, (m % 8) as f64 - 4.0, 0.0])
            .collect();
        Scan {
            grid: Grid::new([8, 8, 1], [80.0, 80.0, 10.0]).unwrap(),
            data: vec![Complex::new(1.0, 0.0); traj.len()],
            traj,
            coils: 1,
            noise: None,
            maps: None,
            truth: None,
            anatomy: None,
            geometry: None,
            parts: Vec::new(),
        }
    }

    fn problem(s: &Scan, allow: bool) -> String {
        check_arrays(s, "(arrays)", allow).unwrap_err().to_string()
    }

    #[test]
    fn arrays_are_checked_as_a_file_is() {
        assert!(check_arrays(&scan(), "(arrays)", false).is_ok());
        let mut s = scan();
        s.data[5] = Complex::new(f64::NAN, 0.0);
        assert!(
            problem(&s, false).contains("kspace/data"),
            "{}",
            problem(&s, false)
        );
        assert!(problem(&s, false).contains("not finite at index 10"));
        let mut s = scan();
        s.traj[3][0] = 4.5;
        assert!(problem(&s, false).contains("beyond Nyquist"));
        assert!(check_arrays(&s, "(arrays)", true).is_ok());
        let mut s = scan();
        s.maps = Some(vec![vec![Complex::new(1e-40, 0.0); 64]]);
        assert!(problem(&s, false).contains("root sum of squares"));
        let mut s = scan();
        s.traj.clear();
        s.data.clear();
        assert!(problem(&s, false).contains("holds no samples"));
    }
}
