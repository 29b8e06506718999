//! A phantom TOML: an accepted phantom gives finite k-space data and truth.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(p) = recon_synth::Phantom::parse(&text, "fuzz") {
        let grid = recon_core::Grid::new([4, 4, 4], [240.0; 3]).unwrap();
        let d = p.kspace(&grid, &[[0.0; 3], [1.5, -2.0, 0.5]]);
        assert!(d.iter().all(|c| c.re.is_finite() && c.im.is_finite()));
        assert!(p.rasterise(&grid, 1).iter().all(|v| v.is_finite()));
    }
});
