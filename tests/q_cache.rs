//! The Q cache: hit, miss, corruption, truncation, wrong key.

mod common;

use common::*;
use recon_core::{CpuBackend, Grid};
use recon_q::{load_or_compute, Cache, CacheStatus};
use std::io::{Seek, SeekFrom, Write};

fn problem(seed: u64) -> (Grid, Vec<[f64; 3]>) {
    let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, 300, &mut rng);
    (grid, traj)
}

/// Every file in the cache folder, so leftovers of a failed write show up.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn second_run_hits_and_another_trajectory_misses() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path());
    let be = CpuBackend::<f32>::new();
    let (grid, traj) = problem(21);
    let (q1, s1) = load_or_compute(&be, Some(&cache), &grid, &traj, &mut no_progress()).unwrap();
    assert_eq!(s1, CacheStatus::Miss);
    let (q2, s2) = load_or_compute(&be, Some(&cache), &grid, &traj, &mut no_progress()).unwrap();
    assert_eq!(s2, CacheStatus::Hit);
    assert_eq!(q1, q2, "a hit returns exactly what was stored");

    // One sample moved: a different key, a miss.
    let mut other = traj.clone();
    other[7][0] += 1e-3;
    let (_, s3) = load_or_compute(&be, Some(&cache), &grid, &other, &mut no_progress()).unwrap();
    assert_eq!(s3, CacheStatus::Miss);
    // The same trajectory in f64 is another entry too.
    let (_, s4) = load_or_compute(
        &CpuBackend::<f64>::new(),
        Some(&cache),
        &grid,
        &traj,
        &mut no_progress(),
    )
    .unwrap();
    assert_eq!(s4, CacheStatus::Miss);
    assert_eq!(files(tmp.path()).len(), 3, "{:?}", files(tmp.path()));
    assert!(files(tmp.path())
        .iter()
        .all(|f| f.starts_with("q-") && f.ends_with(".h5")));
}

fn corrupt_and_check(damage: impl Fn(&std::path::Path)) {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path());
    let be = CpuBackend::<f64>::new();
    let (grid, traj) = problem(22);
    let (good, _) = load_or_compute(&be, Some(&cache), &grid, &traj, &mut no_progress()).unwrap();
    let path = recon_q::cache_file(&cache, &grid, &traj, "f64");
    damage(&path);
    let (q, status) = load_or_compute(&be, Some(&cache), &grid, &traj, &mut no_progress()).unwrap();
    assert!(matches!(status, CacheStatus::Invalid(_)), "{status:?}");
    assert_eq!(q, good, "the recomputed Q is the right one");
    // The bad file was replaced: the next load hits.
    let (_, again) = load_or_compute(&be, Some(&cache), &grid, &traj, &mut no_progress()).unwrap();
    assert_eq!(again, CacheStatus::Hit);
    assert_eq!(files(tmp.path()).len(), 1);
}

#[test]
fn truncated_file_is_recomputed() {
    corrupt_and_check(|p| {
        let len = std::fs::metadata(p).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    });
}

#[test]
fn corrupted_data_is_recomputed() {
    // Overwrite 4 KiB in the data region (Q is 128 KiB of the file): the
    // Fletcher-32 checksum of that chunk fails on read.
    corrupt_and_check(|p| {
        let len = std::fs::metadata(p).unwrap().len();
        let mut f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        f.seek(SeekFrom::Start(len / 2)).unwrap();
        f.write_all(&[0xA5; 4096]).unwrap();
    });
}

#[test]
fn garbage_file_is_recomputed() {
    corrupt_and_check(|p| std::fs::write(p, b"not an HDF5 file").unwrap());
}

#[test]
fn file_of_another_key_is_not_used() {
    // A valid Q file renamed to this problem's key (e.g. by hand) is rejected by its stored key.
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path());
    let be = CpuBackend::<f64>::new();
    let (grid, traj_a) = problem(23);
    let (_, traj_b) = problem(24);
    load_or_compute(&be, Some(&cache), &grid, &traj_a, &mut no_progress()).unwrap();
    std::fs::rename(
        recon_q::cache_file(&cache, &grid, &traj_a, "f64"),
        recon_q::cache_file(&cache, &grid, &traj_b, "f64"),
    )
    .unwrap();
    let (_, status) =
        load_or_compute(&be, Some(&cache), &grid, &traj_b, &mut no_progress()).unwrap();
    match status {
        CacheStatus::Invalid(why) => assert!(why.contains("belongs to key"), "{why}"),
        s => panic!("expected Invalid, got {s:?}"),
    }
}
