//! The Q cache: hit, miss, corruption, truncation, wrong key, blocks
//! checked one by one, and files of an older format.

use crate::common;

use common::*;
use recon_core::{Complex, CpuBackend, Grid};
use recon_encoding::NufftBackend;
use recon_encoding::{Engine, Plan};
use recon_q::{Cache, CacheStatus};
use std::io::{Seek, SeekFrom, Write};

fn problem(seed: u64) -> (Grid, Vec<[f64; 3]>) {
    let grid = Grid::new([8, 8, 8], [200.0; 3]).unwrap();
    let mut rng = Rng::new(seed);
    let traj = random_traj(&grid, 300, &mut rng);
    (grid, traj)
}

/// Q by `engine` through the cache.
fn load_with<B: NufftBackend>(
    be: &B,
    cache: &Cache,
    grid: &Grid,
    traj: &[[f64; 3]],
    engine: Engine,
) -> (Vec<Complex<B::Real>>, CacheStatus)
where
    B::Real: recon_q::Stored,
{
    let plan = Plan::new(be, engine, grid, traj).unwrap();
    recon_q::load_or_compute(&plan, Some(cache), &mut no_progress()).unwrap()
}

/// Q by the exact engine through the cache.
fn load_or_compute<B: NufftBackend>(
    be: &B,
    cache: Option<&Cache>,
    grid: &Grid,
    traj: &[[f64; 3]],
) -> (Vec<Complex<B::Real>>, CacheStatus)
where
    B::Real: recon_q::Stored,
{
    load_with(be, cache.unwrap(), grid, traj, Engine::Exact)
}

/// The cache file of the exact engine's Q.
fn cache_file(cache: &Cache, grid: &Grid, traj: &[[f64; 3]]) -> std::path::PathBuf {
    let be = CpuBackend::<f64>::new();
    recon_q::cache_file(cache, &Plan::new(&be, Engine::Exact, grid, traj).unwrap())
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
    let (q1, s1) = load_or_compute(&be, Some(&cache), &grid, &traj);
    assert_eq!(s1, CacheStatus::Miss);
    let (q2, s2) = load_or_compute(&be, Some(&cache), &grid, &traj);
    assert_eq!(s2, CacheStatus::Hit);
    assert_eq!(q1, q2, "a hit returns exactly what was stored");

    // One sample moved: a different key, a miss.
    let mut other = traj.clone();
    other[7][0] += 1e-3;
    let (_, s3) = load_or_compute(&be, Some(&cache), &grid, &other);
    assert_eq!(s3, CacheStatus::Miss);
    // The same trajectory in f64 is another entry too.
    let (_, s4) = load_or_compute(&CpuBackend::<f64>::new(), Some(&cache), &grid, &traj);
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
    let (good, _) = load_or_compute(&be, Some(&cache), &grid, &traj);
    let path = cache_file(&cache, &grid, &traj);
    damage(&path);
    let (q, status) = load_or_compute(&be, Some(&cache), &grid, &traj);
    assert!(matches!(status, CacheStatus::Invalid(_)), "{status:?}");
    assert_eq!(q, good, "the recomputed Q is the right one");
    // The bad file was replaced: the next load hits.
    let (_, again) = load_or_compute(&be, Some(&cache), &grid, &traj);
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
    // CRC-32 of that block fails on read.
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
    load_or_compute(&be, Some(&cache), &grid, &traj_a);
    std::fs::rename(
        cache_file(&cache, &grid, &traj_a),
        cache_file(&cache, &grid, &traj_b),
    )
    .unwrap();
    let (_, status) = load_or_compute(&be, Some(&cache), &grid, &traj_b);
    match status {
        CacheStatus::Invalid(why) => assert!(why.contains("belongs to key"), "{why}"),
        s => panic!("expected Invalid, got {s:?}"),
    }
}

#[test]
fn engines_and_tolerances_never_share_a_q() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path());
    let be = CpuBackend::<f64>::new();
    let (grid, traj) = problem(25);
    let nufft = |tolerance| Engine::Nufft { tolerance };
    let (exact, s) = load_with(&be, &cache, &grid, &traj, Engine::Exact);
    assert_eq!(s, CacheStatus::Miss);
    let (fast, s) = load_with(&be, &cache, &grid, &traj, nufft(1e-6));
    assert_eq!(
        s,
        CacheStatus::Miss,
        "the exact engine's Q is not served to the NUFFT"
    );
    assert_eq!(
        load_with(&be, &cache, &grid, &traj, nufft(1e-3)).1,
        CacheStatus::Miss
    );
    for (engine, want) in [(Engine::Exact, &exact), (nufft(1e-6), &fast)] {
        let (q, s) = load_with(&be, &cache, &grid, &traj, engine);
        assert_eq!(s, CacheStatus::Hit, "{engine:?}");
        assert_eq!(&q, want, "{engine:?}: its own Q back");
    }
    assert_ne!(exact, fast);
    assert_eq!(files(tmp.path()).len(), 3, "{:?}", files(tmp.path()));
}

/// Q of a 40^3 grid in f64: 8 MB, two of the cache's checked blocks.
fn two_blocks() -> (Grid, Vec<Complex<f64>>) {
    let grid = Grid::new([40, 40, 40], [200.0; 3]).unwrap();
    let len: usize = grid.doubled().iter().product();
    assert!(len * 16 > recon_q::BLOCK, "spans blocks");
    let q = Rng::new(31).complex(len);
    (grid, q)
}

#[test]
fn a_q_of_several_blocks_reads_back_whole_and_each_block_is_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path());
    let (grid, q) = two_blocks();
    let key = "k".repeat(64);
    let path = cache.store(&key, &grid, &q).unwrap();
    let back = cache.load::<f64>(&key, &grid).unwrap().unwrap();
    assert!(back == q, "read back bit for bit");
    // One value changed in the last block: that block's check names it.
    let len = std::fs::metadata(&path).unwrap().len();
    let bytes = std::fs::read(&path).unwrap();
    let last = q.last().unwrap().re.to_le_bytes();
    let at = bytes
        .windows(8)
        .rposition(|w| w == last)
        .expect("the last value is in the file") as u64;
    assert!(at > len / 2);
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&(q.last().unwrap().re + 1.0).to_le_bytes())
        .unwrap();
    drop(f);
    let e = cache.load::<f64>(&key, &grid).unwrap_err().to_string();
    assert!(e.contains("block 1 fails its CRC-32"), "{e}");
}

#[test]
fn a_cache_file_of_an_older_recon_is_recomputed_saying_why() {
    // The format before this one: Q chunked, under HDF5's Fletcher-32.
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path());
    let (grid, q) = two_blocks();
    let key = "o".repeat(64);
    let path = cache.path(&key);
    let d = grid.doubled();
    let file = recon_io::hdf5::File::create(&path).unwrap();
    recon_io::write_dataset(&path, &file, "q", &[d[2], d[1], d[0]], &q, true).unwrap();
    recon_io::set_str_attr(&path, &file, "key", &key).unwrap();
    drop(file);
    let e = cache.load::<f64>(&key, &grid).unwrap_err().to_string();
    assert!(e.contains("older recon"), "{e}");
}
