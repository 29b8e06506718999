//! A Parboil mri-q input: an accepted input gives a finite Q.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = recon_parboil::parse_output(data, "fuzz");
    if let Ok(input) = recon_parboil::parse_input(data, "fuzz", None) {
        // Keep each run short.
        if input.k.len() * input.x.len() <= 1 << 16 {
            let cpu = recon_core::CpuBackend::<f64>::new();
            let q = recon_parboil::compute_q(&cpu, &input, &mut |_, _| {}).unwrap();
            assert!(q.iter().all(|c| c.re.is_finite() && c.im.is_finite()));
        }
    }
});
