//! Reading a NIfTI-1 image with its geometry: a reference from another scan
//! (a proton-density or T1 image for the anatomical prior), placed in the
//! scanner by its own voxel-to-RAS transform.
//!
//! The transform is the sform when `sform_code > 0`, else the qform when
//! `qform_code > 0` (NIfTI's rule, as nibabel applies it); a file with
//! neither has no place in the scanner and is refused. Spatial units are
//! taken from `xyzt_units` (metres and micrometres converted to mm; unset
//! means mm). The header is checked before the volume is read: a 3-D
//! image, or 4-D with one volume; at most [`MAX_VOXELS`]; a file long
//! enough for what it declares (`.nii.gz` is read as it is decompressed).

use crate::{layout as bad, IoError};
use recon_core::Oriented;
use std::path::Path;

/// The most voxels a reference may have (512^3: 1 GiB as f64).
pub const MAX_VOXELS: usize = 512 * 512 * 512;

/// Reads `path` (`.nii` or `.nii.gz`).
pub fn read_nifti(path: &Path) -> Result<Oriented, IoError> {
    use nifti::{IntoNdArray, NiftiObject};
    let what = "NIfTI header";
    let header = nifti::NiftiHeader::from_file(path)
        .map_err(|e| bad(path, what, format!("cannot be read: {e}")))?;
    let rank = header.dim[0] as usize;
    let d = header.dim;
    if !(2..=4).contains(&rank) || (rank == 4 && d[4] != 1) {
        return Err(bad(
            path,
            what,
            format!(
                "has dim {:?}: a reference must be one 2-D or 3-D image (3 dimensions, or 4 with one volume)",
                &d[..=rank.min(7)]
            ),
        ));
    }
    let n = [
        d[1] as usize,
        d[2] as usize,
        if rank >= 3 { d[3] as usize } else { 1 },
    ];
    let voxels: usize = n.iter().product();
    if n.contains(&0) || voxels > MAX_VOXELS {
        return Err(bad(
            path,
            what,
            format!(
                "has {n:?} voxels: each size must be at least 1, and {MAX_VOXELS} voxels at most"
            ),
        ));
    }
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    if !gz {
        let len = std::fs::metadata(path).map_or(0, |m| m.len());
        let need = header.vox_offset.max(0.0) as u64
            + voxels as u64 * (header.bitpix.max(0) as u64).div_ceil(8);
        if len < need {
            return Err(bad(
                path,
                "NIfTI volume",
                format!("is cut short: {voxels} voxels of {} bits after byte {} need {need} bytes, the file has {len}", header.bitpix, header.vox_offset),
            ));
        }
    }
    let affine = affine(&header).map_err(|why| bad(path, what, why))?;
    let obj = nifti::ReaderOptions::new()
        .read_file(path)
        .map_err(|e| bad(path, "NIfTI volume", format!("cannot be read: {e}")))?;
    let array = obj.into_volume().into_ndarray::<f64>().map_err(|e| {
        bad(
            path,
            "NIfTI volume",
            format!("cannot be read as numbers: {e}"),
        )
    })?;
    // array[[i, j, k]] is voxel (i, j, k): its transpose, read in logical
    // order, runs i fastest.
    let values: Vec<f64> = array.t().iter().copied().collect();
    if values.len() != voxels {
        return Err(bad(
            path,
            "NIfTI volume",
            format!("holds {} values for {n:?} voxels", values.len()),
        ));
    }
    Oriented::new(n, values, affine).map_err(|e| bad(path, "NIfTI volume", e.to_string()))
}

/// The header's voxel-to-RAS transform in mm (see the module).
fn affine(h: &nifti::NiftiHeader) -> Result<[[f64; 4]; 3], String> {
    // NIFTI_UNITS_METER 1, _MM 2, _MICRON 3; 0: unknown, taken as mm.
    let unit = match h.xyzt_units & 0x07 {
        0 | 2 => 1.0,
        1 => 1000.0,
        3 => 0.001,
        u => {
            return Err(format!(
                "has spatial unit code {u}, not metres, mm or micrometres"
            ))
        }
    };
    let mut a = [[0.0; 4]; 3];
    if h.sform_code > 0 {
        for (r, row) in [h.srow_x, h.srow_y, h.srow_z].iter().enumerate() {
            for c in 0..4 {
                a[r][c] = row[c] as f64 * unit;
            }
        }
    } else if h.qform_code > 0 {
        let (b, c, d) = (h.quatern_b as f64, h.quatern_c as f64, h.quatern_d as f64);
        let a0 = (1.0 - (b * b + c * c + d * d)).max(0.0).sqrt();
        let r = [
            [
                a0 * a0 + b * b - c * c - d * d,
                2.0 * (b * c - a0 * d),
                2.0 * (b * d + a0 * c),
            ],
            [
                2.0 * (b * c + a0 * d),
                a0 * a0 + c * c - b * b - d * d,
                2.0 * (c * d - a0 * b),
            ],
            [
                2.0 * (b * d - a0 * c),
                2.0 * (c * d + a0 * b),
                a0 * a0 + d * d - c * c - b * b,
            ],
        ];
        let qfac = if h.pixdim[0] < 0.0 { -1.0 } else { 1.0 };
        let s = [
            h.pixdim[1] as f64,
            h.pixdim[2] as f64,
            qfac * h.pixdim[3] as f64,
        ];
        let t = [h.quatern_x as f64, h.quatern_y as f64, h.quatern_z as f64];
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] = r[i][j] * s[j] * unit;
            }
            a[i][3] = t[i] * unit;
        }
    } else {
        return Err(
            "has qform_code and sform_code 0: no place in the scanner, so it cannot be aligned with the reconstruction"
                .into(),
        );
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> nifti::NiftiHeader {
        nifti::NiftiHeader {
            pixdim: [1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0],
            xyzt_units: 2,
            qform_code: 0,
            sform_code: 0,
            ..nifti::NiftiHeader::default()
        }
    }

    #[test]
    fn the_qform_quaternion_gives_the_rotation_and_the_sform_wins_when_set() {
        // 90 degrees about z: (b, c, d) = (0, 0, sin 45).
        let mut h = header();
        h.qform_code = 1;
        h.quatern_d = std::f32::consts::FRAC_1_SQRT_2;
        h.quatern_x = 10.0;
        h.quatern_y = -5.0;
        h.quatern_z = 1.0;
        let a = affine(&h).unwrap();
        let want = [
            [0.0, -3.0, 0.0, 10.0],
            [2.0, 0.0, 0.0, -5.0],
            [0.0, 0.0, 4.0, 1.0],
        ];
        for r in 0..3 {
            for c in 0..4 {
                assert!((a[r][c] - want[r][c]).abs() < 1e-6, "{a:?}");
            }
        }
        // qfac -1 flips the third axis.
        h.pixdim[0] = -1.0;
        assert!((affine(&h).unwrap()[2][2] + 4.0).abs() < 1e-6);
        // An sform, in metres: taken before the qform, in mm.
        h.sform_code = 2;
        h.xyzt_units = 1;
        h.srow_x = [0.001, 0.0, 0.0, 0.1];
        h.srow_y = [0.0, 0.001, 0.0, 0.0];
        h.srow_z = [0.0, 0.0, 0.002, 0.0];
        let a = affine(&h).unwrap();
        assert!(
            (a[0][0] - 1.0).abs() < 1e-6
                && (a[0][3] - 100.0).abs() < 1e-4
                && (a[2][2] - 2.0).abs() < 1e-6
        );
        // Neither: no place in the scanner.
        let e = affine(&header()).unwrap_err();
        assert!(e.contains("qform_code and sform_code 0"), "{e}");
    }

    #[test]
    fn a_written_nifti_reads_back_with_its_values_in_order() {
        use ndarray::ShapeBuilder;
        let dir = std::env::temp_dir().join(format!("recon-nifti-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("v.nii");
        let n = [3, 4, 2];
        let values: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let mut h = header();
        h.sform_code = 1;
        h.srow_x = [2.0, 0.0, 0.0, -3.0];
        h.srow_y = [0.0, 3.0, 0.0, -6.0];
        h.srow_z = [0.0, 0.0, 4.0, -4.0];
        let array = ndarray::ArrayView3::from_shape((n[0], n[1], n[2]).f(), &values).unwrap();
        nifti::writer::WriterOptions::new(&path)
            .reference_header(&h)
            .write_nifti(&array)
            .unwrap();
        let r = read_nifti(&path).unwrap();
        assert_eq!(r.n, n);
        // i fastest, as written.
        assert_eq!(r.values, (0..24).map(|v| v as f64).collect::<Vec<_>>());
        assert_eq!(r.affine[1], [0.0, 3.0, 0.0, -6.0]);
        // A file cut short is refused before its volume is read.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
        let e = read_nifti(&path).unwrap_err().to_string();
        assert!(e.contains("cut short"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
