//! The slow, obvious reference of total variation denoising for
//! tests/ops.rs: the difference operator K (plain or directional) as an
//! explicit sparse matrix built from the definitions, and accelerated
//! projected gradient on the dual, stopped by its duality gap.

use recon_core::Complex;

type V = Vec<Complex<f64>>;

/// `K` as an explicit sparse matrix, built from the definitions (forward
/// differences; the directional projection from the reference), row `a N
/// + i` for component `a` of voxel `i`.
pub fn dense_k(n: [usize; 3], directional: Option<(&[f64], f64)>) -> Vec<Vec<(usize, f64)>> {
    let len: usize = n.iter().product();
    let at = |x: usize, y: usize, z: usize| (z * n[1] + y) * n[0] + x;
    let diff = |i: usize, a: usize| -> Vec<(usize, f64)> {
        let (x, y, z) = (i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1]));
        let c = [x, y, z];
        if c[a] + 1 >= n[a] {
            return vec![];
        }
        let next = match a {
            0 => at(x + 1, y, z),
            1 => at(x, y + 1, z),
            _ => at(x, y, z + 1),
        };
        vec![(next, 1.0), (i, -1.0)]
    };
    let mut rows = vec![vec![]; 3 * len];
    for i in 0..len {
        let xi = match directional {
            None => [0.0; 3],
            Some((r, eta_rel)) => {
                let grad_r = |j: usize| -> [f64; 3] {
                    [0, 1, 2].map(|a| diff(j, a).iter().map(|&(k, w)| w * r[k]).sum())
                };
                let peak = (0..len)
                    .map(|j| grad_r(j).iter().map(|g| g * g).sum::<f64>().sqrt())
                    .fold(0.0, f64::max);
                let g = grad_r(i);
                let d = (g.iter().map(|g| g * g).sum::<f64>() + (eta_rel * peak).powi(2)).sqrt();
                g.map(|g| g / d)
            }
        };
        for a in 0..3 {
            // row (a, i) = sum_b (delta_ab - xi_a xi_b) diff(i, b)
            for b in 0..3 {
                let p = if a == b { 1.0 } else { 0.0 } - xi[a] * xi[b];
                for (k, w) in diff(i, b) {
                    rows[a * len + i].push((k, p * w));
                }
            }
        }
    }
    rows
}

/// The TV denoising reference: `min 1/2 |x - f|^2 + lambda sum_i |(K x)_i|`
/// by accelerated projected gradient on the dual `max_{|p_i| <= lambda}
/// Re <K^H p, f> - 1/2 |K^H p|^2`, `x = f - K^H p`, until the duality gap
/// is below 1e-13 |f|^2: then `|x - x*|^2 <= 2 gap` (the primal is
/// 1-strongly convex).
pub fn tv_reference(k: &[Vec<(usize, f64)>], f: &[Complex<f64>], lambda: f64) -> V {
    let (m, len) = (k.len(), f.len());
    let kh = |p: &[Complex<f64>]| {
        let mut out = vec![Complex::default(); len];
        for (r, row) in k.iter().enumerate() {
            for &(c, w) in row {
                out[c] += p[r] * w;
            }
        }
        out
    };
    let kx = |x: &[Complex<f64>]| -> V {
        k.iter()
            .map(|row| row.iter().map(|&(c, w)| x[c] * w).sum())
            .collect()
    };
    let group = |v: &V, i: usize| {
        (0..3)
            .map(|a| v[a * len + i].norm_sqr())
            .sum::<f64>()
            .sqrt()
    };
    let project = |v: &mut V| {
        for i in 0..len {
            let s = group(v, i);
            if s > lambda {
                for a in 0..3 {
                    v[a * len + i] *= lambda / s;
                }
            }
        }
    };
    let ff: f64 = f.iter().map(|v| v.norm_sqr()).sum();
    // |K|^2 <= 12 for the differences, and |P| <= 1.
    let step = 1.0 / 12.0;
    let (mut p, mut v, mut t) = (
        vec![Complex::default(); m],
        vec![Complex::default(); m],
        1.0f64,
    );
    for it in 0..400_000 {
        // p+ = proj(v + step K (f - K^H v))
        let r: V = f.iter().zip(kh(&v)).map(|(a, b)| a - b).collect();
        let mut next: V = v.iter().zip(kx(&r)).map(|(a, b)| a + b * step).collect();
        project(&mut next);
        let t_next = (1.0 + (1.0 + 4.0 * t * t).sqrt()) / 2.0;
        v = next
            .iter()
            .zip(&p)
            .map(|(a, b)| a + (a - b) * ((t - 1.0) / t_next))
            .collect();
        (p, t) = (next, t_next);
        if it % 500 == 0 {
            let khp = kh(&p);
            let x: V = f.iter().zip(&khp).map(|(a, b)| a - b).collect();
            let kxv = kx(&x);
            let primal = 0.5 * nrm2(&x, f) + lambda * (0..len).map(|i| group(&kxv, i)).sum::<f64>();
            let dual = khp
                .iter()
                .zip(f)
                .map(|(a, b)| (a.conj() * b).re)
                .sum::<f64>()
                - 0.5 * khp.iter().map(|v| v.norm_sqr()).sum::<f64>();
            if primal - dual < 1e-13 * ff {
                return x;
            }
        }
    }
    panic!("the TV reference did not reach its duality gap");
}

fn nrm2(a: &[Complex<f64>], b: &[Complex<f64>]) -> f64 {
    a.iter().zip(b).map(|(a, b)| (a - b).norm_sqr()).sum()
}
