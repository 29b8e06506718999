//! The NIfTI-1 outputs: their names, descriptions and voxels, and the
//! writer, with the image's voxel-to-scanner transform in qform and sform.

use crate::arrange::Nifti;
use crate::config::Loaded;
use std::path::Path;

/// The unit quaternion (b, c, d) and qfac of NIfTI's qform for the
/// rotation part of `affine` (its columns divided by their lengths), as
/// nifti1_io's `nifti_mat44_to_quatern` computes them.
fn quaternion(affine: &[[f64; 4]; 3]) -> ([f64; 3], f64) {
    let mut r = [[0.0; 3]; 3];
    for c in 0..3 {
        let len = (0..3)
            .map(|i| affine[i][c] * affine[i][c])
            .sum::<f64>()
            .sqrt();
        for i in 0..3 {
            r[i][c] = affine[i][c] / len;
        }
    }
    let det = r[0][0] * (r[1][1] * r[2][2] - r[1][2] * r[2][1])
        - r[0][1] * (r[1][0] * r[2][2] - r[1][2] * r[2][0])
        + r[0][2] * (r[1][0] * r[2][1] - r[1][1] * r[2][0]);
    // A left-handed frame: qfac = -1, the third column negated.
    let qfac = if det < 0.0 { -1.0 } else { 1.0 };
    for row in &mut r {
        row[2] *= qfac;
    }
    let (xx, yy, zz) = (r[0][0], r[1][1], r[2][2]);
    let (a, b, c, d) = if xx + yy + zz + 1.0 > 0.5 {
        let a = 0.5 * (xx + yy + zz + 1.0).sqrt();
        let f = 0.25 / a;
        (
            a,
            f * (r[2][1] - r[1][2]),
            f * (r[0][2] - r[2][0]),
            f * (r[1][0] - r[0][1]),
        )
    } else if 1.0 + xx - (yy + zz) > 1.0 {
        let b = 0.5 * (1.0 + xx - (yy + zz)).sqrt();
        let f = 0.25 / b;
        (
            f * (r[2][1] - r[1][2]),
            b,
            f * (r[0][1] + r[1][0]),
            f * (r[0][2] + r[2][0]),
        )
    } else if 1.0 + yy - (xx + zz) > 1.0 {
        let c = 0.5 * (1.0 + yy - (xx + zz)).sqrt();
        let f = 0.25 / c;
        (
            f * (r[0][2] - r[2][0]),
            f * (r[0][1] + r[1][0]),
            c,
            f * (r[1][2] + r[2][1]),
        )
    } else {
        let d = 0.5 * (1.0 + zz - (xx + yy)).sqrt();
        let f = 0.25 / d;
        (
            f * (r[1][0] - r[0][1]),
            f * (r[0][2] + r[2][0]),
            f * (r[1][2] + r[2][1]),
            d,
        )
    };
    // q and -q are one rotation: NIfTI stores the one with a >= 0.
    let sign = if a < 0.0 { -1.0 } else { 1.0 };
    ([sign * b, sign * c, sign * d], qfac)
}

/// A NIfTI image's voxels: magnitudes (float32) or complex values
/// (NIfTI's complex64, `output.complex`).
pub(crate) enum Voxels {
    Real(Nifti<f32>),
    Complex(Nifti<[f32; 2]>),
}

/// The name of a NIfTI output: `stem.nii`, or `stem.nii.gz` when
/// `output.compress` asks for gzip.
pub(crate) fn nifti_name(l: &Loaded, stem: &str) -> String {
    format!(
        "{stem}.nii{}",
        if l.cfg.output.compress { ".gz" } else { "" }
    )
}

/// Writes `image` to `path` as NIfTI-1: float32 (or complex64), 3 to 7
/// dimensions (x fastest), voxel size in mm, and the image's
/// voxel-to-scanner transform (RAS) in both qform and sform;
/// gzip-compressed when `gz` (`.nii.gz`).
pub(crate) fn write_nifti(
    path: &Path,
    image: &Voxels,
    what: &str,
    gz: bool,
) -> Result<(), recon_io::IoError> {
    let (dims, voxel_mm, affine) = match image {
        Voxels::Real(n) => (&n.dims, n.voxel_mm, &n.affine),
        Voxels::Complex(n) => (&n.dims, n.voxel_mm, &n.affine),
    };
    let v = voxel_mm.map(|x| x as f32);
    let a = affine;
    let (q, qfac) = quaternion(a);
    let row = |r: usize| [0, 1, 2, 3].map(|c| a[r][c] as f32);
    let header = nifti::NiftiHeader {
        pixdim: [qfac as f32, v[0], v[1], v[2], 1.0, 1.0, 1.0, 1.0],
        xyzt_units: 2, // NIFTI_UNITS_MM
        qform_code: 1, // scanner anatomical
        sform_code: 1,
        quatern_b: q[0] as f32,
        quatern_c: q[1] as f32,
        quatern_d: q[2] as f32,
        quatern_x: a[0][3] as f32,
        quatern_y: a[1][3] as f32,
        quatern_z: a[2][3] as f32,
        srow_x: row(0),
        srow_y: row(1),
        srow_z: row(2),
        descrip: format!("recon: {what}").into_bytes(),
        ..nifti::NiftiHeader::default()
    };
    // x fastest: a Fortran-order array of dims [x, y, z, ...].
    use ndarray::ShapeBuilder;
    let options = nifti::writer::WriterOptions::new(path)
        .reference_header(&header)
        .compress(gz);
    let written = match image {
        Voxels::Real(n) => {
            let array = ndarray::ArrayViewD::from_shape(dims.clone().f(), &n.values)
                .expect("one value per voxel");
            options.write_nifti(&array)
        }
        Voxels::Complex(n) => {
            let array = ndarray::ArrayViewD::from_shape(dims.clone().f(), &n.values)
                .expect("one value per voxel");
            options.write_nifti_with_type(&array, nifti::NiftiType::Complex64)
        }
    };
    written.map_err(|e| match e {
        nifti::NiftiError::Io(e) => recon_io::os_error(path, "write", e),
        e => recon_io::IoError::Encode {
            path: path.display().to_string(),
            format: "NIfTI",
            message: e.to_string(),
        },
    })
}

/// What a NIfTI output of `stem` holds, for its header's description.
pub(crate) fn description(l: &Loaded, stem: &str) -> &'static str {
    match (stem, l.cfg.output.complex) {
        ("recon", true) => "iterative reconstruction (complex)",
        ("recon", false) => "|iterative reconstruction|",
        ("gridding", true) => "gridding (complex)",
        ("gridding", false) => "|gridding|",
        ("truth", _) => "true image",
        _ => "|coil maps|",
    }
}
