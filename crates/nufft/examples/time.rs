//! Times type 1 and type 2 on uniformly random points: `cargo run
//! --release --example time -p recon-nufft -- N POINTS TOL [f32]`.
use recon_core::{Complex, Real};
use recon_nufft::Plan;
use std::time::Instant;

fn run<T: Real>(n: usize, m: usize, tol: f64) {
    let mut s = 1u64;
    let mut r = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let x: Vec<[f64; 3]> = (0..m)
        .map(|_| [0; 3].map(|_| std::f64::consts::PI * (2.0 * r() - 1.0)))
        .collect();
    let c: Vec<Complex<T>> = (0..m)
        .map(|_| Complex::new(T::of(r()), T::of(r())))
        .collect();
    let t = Instant::now();
    let mut p = Plan::<T>::new([n; 3], tol, 1).unwrap();
    p.set_points(&x).unwrap();
    println!(
        "plan + set points {:.3} s (w {})",
        t.elapsed().as_secs_f64(),
        p.kernel.width
    );
    let mut f = vec![Complex::default(); n * n * n];
    for _ in 0..2 {
        let t = Instant::now();
        p.type1(&mut f, &c).unwrap();
        let t1 = t.elapsed().as_secs_f64();
        let mut out = vec![Complex::default(); m];
        let t = Instant::now();
        p.type2(&mut out, &f).unwrap();
        println!(
            "type 1 {t1:.3} s, type 2 {:.3} s",
            t.elapsed().as_secs_f64()
        );
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n = a.get(1).map_or(128, |v| v.parse().unwrap());
    let m = a.get(2).map_or(1_000_000, |v| v.parse().unwrap());
    let tol = a.get(3).map_or(1e-6, |v| v.parse().unwrap());
    if a.get(4).is_some_and(|v| v == "f32") {
        run::<f32>(n, m, tol)
    } else {
        run::<f64>(n, m, tol)
    }
}
