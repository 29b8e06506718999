#!/usr/bin/env python3
"""Summarises the prototype's logs (see README.md): per config, each
truth-free rule's lambda and PSNR from the sweep's points, against the
truth-best. Usage: rules.py LOG..."""
import math, re, sys

def rows(path):
    out, psnr, s2 = {}, {}, None
    for l in open(path):
        if 'SUREROW' in l or 'LROW' in l:
            d = dict(re.findall(r'(\w+) ([-\d.e+]+)', l))
            r = out.setdefault(float(d['lambda']), {})
            for k, v in d.items():
                # LROW's "mis" is the whole misfit; SUREROW's is less ||D||^2
                r[('misfit' if 'LROW' in l else 'mis_less_d') if k == 'mis' else k] = float(v)
        elif "the config's prior" in l and 'PSNR' in l and 'chose' not in l:
            m = re.search(r'lambda ([\d.e+-]+): PSNR ([\d.]+)', l)
            psnr[float(m.group(1))] = float(m.group(2))
        elif 'sigma2 Some' in l:
            s2 = float(re.search(r'Some\(([\d.e+-]+)\)', l).group(1))
            samples = float(re.search(r'sumw ([\d.e+-]+)', l).group(1))  # mean weight 1
    pts = []
    for lam in sorted(out):
        p = [v for k, v in psnr.items() if abs(k - lam) / lam < 1e-3]
        r = out[lam]
        pts.append(dict(lam=lam, psnr=p[0], **r))
    return pts, s2, samples

def crossing(pts, f):
    """lambda where f crosses 0 from below, log-interpolated."""
    for a, b in zip(pts, pts[1:]):
        fa, fb = f(a), f(b)
        if fa < 0 <= fb:
            t = -fa / (fb - fa)
            return math.exp(math.log(a['lam']) + t * math.log(b['lam'] / a['lam']))
    return None

def psnr_at(pts, lam):
    """PSNR at lam, interpolated in log lambda between sweep points."""
    if lam is None:
        return None
    for a, b in zip(pts, pts[1:]):
        if a['lam'] <= lam <= b['lam']:
            t = math.log(lam / a['lam']) / math.log(b['lam'] / a['lam'])
            return a['psnr'] + t * (b['psnr'] - a['psnr'])
    return None

print("| config | best lambda | PSNR | misfit / noise at best | discrepancy (misfit = noise) | DCF-weighted SURE minimum | evidence (lambda ||Wx||^2 = sigma^2 df) | L-curve corner |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for path in sys.argv[1:]:
    pts, s2, samples = rows(path)
    noise = s2 * samples
    best = max(pts, key=lambda p: p['psnr'])
    dp = crossing(pts, lambda p: p['misfit'] / noise - 1)
    sure = min(pts, key=lambda p: p['sure_w'])['lam']
    ev = crossing(pts, lambda p: p['labs1'] * p['lam'] * p['reg'] / (s2 * p['df']) - 1)
    # L-curve: largest curvature of (ln misfit, ln ||Wx||^2) over the points
    curv = []
    for a, b, c in zip(pts, pts[1:], pts[2:]):
        x = [math.log(p['misfit']) for p in (a, b, c)]
        y = [math.log(p['reg']) for p in (a, b, c)]
        dx, dy = (x[2] - x[0]) / 2, (y[2] - y[0]) / 2
        ddx, ddy = x[2] - 2 * x[1] + x[0], y[2] - 2 * y[1] + y[0]
        curv.append(((dx * ddy - dy * ddx) / (dx * dx + dy * dy) ** 1.5, b['lam']))
    corner = max(curv)[1]
    fmt = lambda lam: "-" if lam is None else f"{lam:.3g} ({psnr_at(pts, lam):.2f} dB)"
    name = path.split('/')[-1][:-4]
    print(f"| {name} | {best['lam']:.3g} | {best['psnr']:.2f} | {best['misfit'] / noise:.2f} | {fmt(dp)} | {fmt(sure)} | {fmt(ev)} | {fmt(corner)} |")
