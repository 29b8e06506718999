//! The images of an ISMRMRD file as its acquisitions are gathered, and the
//! checks that they fit together.

use crate::geometry::{Geometry, Index, AXES};
use crate::{layout as bad, IoError};
use recon_core::Complex;
use std::collections::BTreeMap;
use std::path::Path;

/// One image's acquisitions, gathered in file order.
#[derive(Default)]
pub(super) struct Image {
    /// Cycles/FOV, one per imaging sample.
    pub(super) traj: Vec<[f64; 3]>,
    /// Per channel, its samples.
    pub(super) data: Vec<Vec<Complex<f64>>>,
    /// Its geometry, and the acquisition it was first read from.
    pub(super) geometry: Option<Geometry>,
    pub(super) first: usize,
}

/// What the acquisitions hold.
#[derive(Default)]
pub(super) struct Gathered {
    /// The images, by index.
    pub(super) images: BTreeMap<Index, Image>,
    /// Channels of the imaging acquisitions (of the first).
    pub(super) channels: Option<usize>,
    /// Per channel, its noise samples (noise measurement acquisitions).
    pub(super) noise: Vec<Vec<Complex<f64>>>,
}

impl Gathered {
    pub(super) fn samples(&self) -> usize {
        self.images.values().map(|i| i.traj.len()).sum()
    }

    /// The memory held so far, and at the end, when each kind's channels
    /// are joined into one array beside them (the vectors' capacities
    /// count: they grow by doubling).
    pub(super) fn need(&self) -> crate::scan::ReadNeed {
        let caps = |v: &[Vec<Complex<f64>>]| v.iter().map(Vec::capacity).sum::<usize>() as u64;
        let lens = |v: &[Vec<Complex<f64>>]| v.iter().map(Vec::len).sum::<usize>() as u64;
        let data: u64 = self.images.values().map(|i| lens(&i.data)).sum();
        let data_caps: u64 = self.images.values().map(|i| caps(&i.data)).sum();
        let traj_caps: u64 = self.images.values().map(|i| i.traj.capacity() as u64).sum();
        let joined = 16 * (data + lens(&self.noise));
        let decoded = 24 * self.samples() as u64 + joined;
        crate::scan::ReadNeed {
            own: 24 * traj_caps + 16 * (data_caps + caps(&self.noise)) + joined,
            decoded,
        }
    }
}

/// The images of a file of several must cover every combination of the
/// counters they use (no slice without a contrast that the others have)
/// and hold the same number of samples each.
pub(super) fn check_images(path: &Path, images: &BTreeMap<Index, Image>) -> Result<(), IoError> {
    // The values each counter takes.
    let mut values: [std::collections::BTreeSet<u16>; 5] = Default::default();
    for index in images.keys() {
        for (seen, v) in values.iter_mut().zip(index.0) {
            seen.insert(v);
        }
    }
    let count: usize = values.iter().map(|v| v.len()).product();
    if count != images.len() {
        // Every combination, and the first one missing.
        let mut each = vec![Index::default()];
        for (d, vals) in values.iter().enumerate() {
            each = each
                .into_iter()
                .flat_map(|i| {
                    vals.iter().map(move |v| {
                        let mut j = i;
                        j.0[d] = *v;
                        j
                    })
                })
                .collect();
        }
        let missing = each
            .into_iter()
            .find(|i| !images.contains_key(i))
            .expect("fewer images than combinations");
        let used: Vec<String> = AXES
            .iter()
            .zip(&values)
            .filter(|(_, v)| v.len() > 1)
            .map(|((field, _), v)| format!("idx.{field} takes {}", v.len()))
            .collect();
        return Err(bad(
            path,
            "dataset/data",
            format!(
                "has no imaging acquisitions for {}: its images ({}) must cover every combination, {count} images, but {} are present",
                missing.describe(),
                used.join(", "),
                images.len()
            ),
        ));
    }
    let (first, one) = images.iter().next().expect("an image");
    for (index, image) in images {
        if image.traj.len() != one.traj.len() {
            return Err(bad(
                path,
                "dataset/data",
                format!(
                    "{} holds {} samples but {} holds {}: every image of a file must have as many samples",
                    index.describe(),
                    image.traj.len(),
                    first.describe(),
                    one.traj.len()
                ),
            ));
        }
    }
    Ok(())
}
