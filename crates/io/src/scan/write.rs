//! Writing scan files (atomically, version attribute always set).

use super::{CoilNoise, Scan};
use crate::{hdf5, Context, IoError};
use recon_core::Complex;
use std::path::Path;

/// Writes a scan file atomically. A scan file holds one image: a scan of
/// several (`parts`) is refused.
pub fn write_scan(path: &Path, scan: &Scan) -> Result<(), IoError> {
    if !scan.parts.is_empty() {
        return Err(crate::layout(
            path,
            "kspace",
            format!(
                "cannot hold the {} images of one scan: a scan file holds one image",
                scan.parts.len()
            ),
        ));
    }
    crate::write_atomic(path, |tmp| {
        let file = hdf5::File::create(tmp).at(tmp, "create")?;
        let ks = file.create_group("kspace").at(tmp, "create /kspace")?;
        let m = scan.traj.len();
        let t: Vec<f32> = scan.traj.iter().flat_map(|k| k.map(|v| v as f32)).collect();
        let d: Vec<f32> = scan
            .data
            .iter()
            .flat_map(|c| [c.re as f32, c.im as f32])
            .collect();
        let pairs = |v: &[Complex<f64>]| -> Vec<f32> {
            v.iter().flat_map(|c| [c.re as f32, c.im as f32]).collect()
        };
        let c = scan.coils;
        let v2 = scan.version() == 2;
        crate::write_dataset(tmp, &ks, "trajectory", &[m, 3], &t, false)?;
        if v2 {
            crate::write_dataset(tmp, &ks, "data", &[c, m, 2], &d, false)?;
        } else {
            crate::write_dataset(tmp, &ks, "data", &[m, 2], &d, false)?;
        }
        crate::set_attr(tmp, &ks, "version", &[scan.version() as i64])?;
        crate::set_attr(tmp, &ks, "fov_mm", &scan.grid.fov_mm)?;
        crate::set_attr(tmp, &ks, "matrix", &scan.grid.n.map(|v| v as i64))?;
        if let Some(g) = &scan.geometry {
            let values = [g.position_mm, g.read_dir, g.phase_dir, g.slice_dir];
            for (name, v) in super::GEOMETRY_ATTRIBUTES.iter().zip(values) {
                crate::set_attr(tmp, &ks, name, &v)?;
            }
        }
        match &scan.noise {
            Some(CoilNoise::Samples(v)) => {
                let k = v.len() / c.max(1);
                crate::write_dataset(tmp, &ks, "noise", &[c, k, 2], &pairs(v), false)?;
            }
            Some(CoilNoise::Covariance(v)) => {
                crate::write_dataset(tmp, &ks, "noise_covariance", &[c, c, 2], &pairs(v), false)?;
            }
            None => {}
        }
        let n = scan.grid.n;
        let shape = [n[2], n[1], n[0]];
        if let Some(maps) = &scan.maps {
            let g = file.create_group("coils").at(tmp, "create /coils")?;
            let flat: Vec<Complex<f64>> = maps.concat();
            crate::write_dataset(
                tmp,
                &g,
                "maps",
                &[c, n[2], n[1], n[0], 2],
                &pairs(&flat),
                false,
            )?;
        }
        let f32s = |v: &[f64]| -> Vec<f32> { v.iter().map(|x| *x as f32).collect() };
        if scan.truth.is_some() || scan.anatomy.is_some() {
            let r = file
                .create_group("reference")
                .at(tmp, "create /reference")?;
            if let Some(t) = &scan.truth {
                crate::write_dataset(tmp, &r, "truth", &shape, &f32s(t), false)?;
            }
            if let Some(a) = &scan.anatomy {
                let m = a.grid.n;
                let ds = crate::write_dataset(
                    tmp,
                    &r,
                    "anatomy",
                    &[m[2], m[1], m[0]],
                    &f32s(&a.values),
                    false,
                )?;
                crate::set_attr(tmp, &ds, "fov_mm", &a.grid.fov_mm)?;
            }
        }
        file.close().at(tmp, "close")
    })
}
