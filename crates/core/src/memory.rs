//! Device memory a reconstruction needs, estimated before allocating.

/// Bytes of device memory each stage holds at its peak, in float32, for an
/// `n` grid and `samples` k-space samples.
pub fn stage_bytes(n: [usize; 3], samples: usize) -> [(&'static str, u64); 3] {
    let vox = (n[0] * n[1] * n[2]) as u64;
    let big = 8 * vox; // the (2N)^3 grid
    let c = 8u64; // one complex float32
    let s = 20 * samples as u64; // one sample: k (3) and a complex coefficient
    [
        // output on the doubled grid, samples
        ("Q", c * big + s),
        // output on the image grid, samples
        ("F^H D", c * vox + s),
        // x, r, p, Ap, b on the image grid; FFT(Q), the work grid and the
        // cuFFT work area on the doubled grid; three weight arrays
        ("CG", c * 5 * vox + c * 3 * big + 3 * 4 * vox),
    ]
}

/// The largest stage's need.
pub fn peak_bytes(n: [usize; 3], samples: usize) -> (&'static str, u64) {
    stage_bytes(n, samples)
        .into_iter()
        .max_by_key(|(_, b)| *b)
        .expect("three stages")
}

/// The largest even cubic matrix whose peak need fits in `free` bytes.
pub fn largest_cubic(samples: usize, free: u64) -> Option<usize> {
    (1..=2048)
        .rev()
        .map(|h| 2 * h)
        .find(|&n| peak_bytes([n; 3], samples).1 <= free)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cg_dominates_and_largest_cubic_fits() {
        // N = 128: CG holds 5 * 2 Mi + 3 * 16 Mi complex floats plus weights.
        let (stage, bytes) = peak_bytes([128; 3], 284_592);
        assert_eq!(stage, "CG");
        assert_eq!(
            bytes,
            8 * 5 * 128u64.pow(3) + 8 * 3 * 256u64.pow(3) + 12 * 128u64.pow(3)
        );
        let n = largest_cubic(284_592, bytes).unwrap();
        assert_eq!(n, 128);
        assert!(peak_bytes([n + 2; 3], 284_592).1 > bytes);
        assert_eq!(largest_cubic(284_592, 1000), None);
    }
}
