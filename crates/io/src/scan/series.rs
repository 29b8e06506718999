//! A scan of several images (an ISMRMRD file's slices, contrasts, ...):
//! split into one scan per image, or narrowed to a selection.

use super::Scan;
use crate::geometry::{Index, Part};

impl Scan {
    /// The version a scan file of it has: 1 for one coil with neither
    /// noise data nor maps, 2 otherwise (the one rule [`super::write_scan`]
    /// follows).
    pub fn version(&self) -> u32 {
        match self.coils > 1 || self.noise.is_some() || self.maps.is_some() {
            true => 2,
            false => 1,
        }
    }

    /// How many images the scan holds.
    pub fn images(&self) -> usize {
        self.parts.len().max(1)
    }

    /// The images' indices, in order (one default index for a scan of one).
    pub fn indices(&self) -> Vec<Index> {
        match self.parts.is_empty() {
            true => vec![Index::default()],
            false => self.parts.iter().map(|p| p.index).collect(),
        }
    }

    /// One scan per image, in order, each with its own geometry; the
    /// noise, maps, truth and reference go with every image. A scan of
    /// one image is returned whole.
    pub fn split(self) -> Vec<(Index, Scan)> {
        if self.parts.is_empty() {
            return vec![(Index::default(), self)];
        }
        let m = self.traj.len();
        let coils = self.coils;
        self.parts
            .iter()
            .map(|p: &Part| {
                let r = p.samples.clone();
                let data = (0..coils)
                    .flat_map(|c| self.data[c * m + r.start..c * m + r.end].iter().copied())
                    .collect();
                let scan = Scan {
                    grid: self.grid,
                    traj: self.traj[r].to_vec(),
                    coils,
                    data,
                    noise: self.noise.clone(),
                    maps: self.maps.clone(),
                    truth: self.truth.clone(),
                    anatomy: self.anatomy.clone(),
                    geometry: p.geometry,
                    parts: Vec::new(),
                };
                (p.index, scan)
            })
            .collect()
    }

    /// Keeps the images `keep` accepts (at least one must remain: the
    /// caller checks its selection against [`Scan::indices`] first). A
    /// selection of one image leaves a scan of one image.
    pub fn select(self, keep: impl Fn(&Index) -> bool) -> Scan {
        if self.parts.is_empty() || self.parts.iter().all(|p| keep(&p.index)) {
            return self;
        }
        let kept: Vec<(Index, Scan)> = self.split().into_iter().filter(|(i, _)| keep(i)).collect();
        join(kept)
    }
}

/// Scans of one image each, on one grid with the same coils, as one scan
/// of several (a single one as itself).
fn join(mut images: Vec<(Index, Scan)>) -> Scan {
    assert!(!images.is_empty(), "a selection keeps an image");
    if images.len() == 1 {
        return images.pop().expect("one").1;
    }
    let total: usize = images.iter().map(|(_, s)| s.traj.len()).sum();
    let coils = images[0].1.coils;
    let mut traj = Vec::with_capacity(total);
    let mut parts = Vec::with_capacity(images.len());
    for (index, s) in &images {
        let start = traj.len();
        traj.extend_from_slice(&s.traj);
        parts.push(Part {
            index: *index,
            samples: start..traj.len(),
            geometry: s.geometry,
        });
    }
    let mut data = Vec::with_capacity(coils * total);
    for c in 0..coils {
        for (_, s) in &images {
            let m = s.traj.len();
            data.extend_from_slice(&s.data[c * m..(c + 1) * m]);
        }
    }
    let first = images.swap_remove(0).1;
    Scan {
        traj,
        data,
        geometry: None,
        parts,
        ..first
    }
}
