//! A scan file, read in-process. recon itself reads such files in a child
//! process, because the HDF5 library can crash or hang on damaged files:
//! this target finds those too (report them upstream), and any panic or
//! unchecked size of recon's own reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("recon-fuzz-{}.h5", std::process::id()));
    std::fs::write(&path, data).unwrap();
    let _ = recon_io::scan::read_scan(&path, false);
});
