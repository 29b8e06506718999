//! An ISMRMRD file, read in-process (see scan_file.rs on HDF5's own crashes).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("recon-fuzz-{}.h5", std::process::id()));
    std::fs::write(&path, data).unwrap();
    if recon_io::ismrmrd::is_ismrmrd(&path) {
        let _ = recon_io::ismrmrd::read_ismrmrd(&path, recon_io::ismrmrd::Units::Normalized, false);
    }
});
