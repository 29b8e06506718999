//! A config text: parsed and checked, accepted or refused, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(cfg) = recon::config::Config::parse(&text) {
        let _ = cfg.validate();
    }
});
