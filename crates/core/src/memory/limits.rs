//! How much memory a process may still take, and what limits it: the
//! machine's available memory (`MemAvailable`), the memory limits of the
//! process's own cgroup and of every cgroup above it, and the process's
//! resource limits (`ulimit -v`, RLIMIT_AS; `ulimit -d`, RLIMIT_DATA) less
//! what it already uses. Each limit is named, so that a refusal can say
//! which one binds. Everything is read from `/proc` and `/sys`; where a
//! file is missing (not Linux, a restricted container) that limit is
//! simply unknown.

use std::path::{Path, PathBuf};

/// One limit on the memory a process can still allocate.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLimit {
    /// Bytes still available under it.
    pub bytes: u64,
    /// What sets it, for messages.
    pub what: String,
}

/// The binding (smallest) limit on this process: the machine's and its
/// cgroups' ([`machine_limits`]) and its own resource limits
/// ([`process_limits`]). `None` where none is known.
pub fn host_limit() -> Option<HostLimit> {
    let mut all = machine_limits();
    all.extend(process_limits("self"));
    smallest(all)
}

/// Bytes this process can still allocate: [`host_limit`]'s.
pub fn available_host_bytes() -> Option<u64> {
    host_limit().map(|l| l.bytes)
}

/// The smallest of `limits`.
pub fn smallest(limits: Vec<HostLimit>) -> Option<HostLimit> {
    limits.into_iter().min_by_key(|l| l.bytes)
}

/// The limits every process of this cgroup shares: `MemAvailable`, and
/// each cgroup memory limit from this process's cgroup up to the root,
/// less that cgroup's use (its inactive file cache counted as free: the
/// kernel reclaims it before it fails an allocation).
pub fn machine_limits() -> Vec<HostLimit> {
    let mut out = Vec::new();
    if let Some(kb) = read("/proc/meminfo").and_then(|s| field(&s, "MemAvailable:")) {
        out.push(HostLimit {
            bytes: kb.saturating_mul(1024),
            what: "the memory available on this machine (MemAvailable)".into(),
        });
    }
    out.extend(cgroup_limits(
        &read("/proc/self/cgroup").unwrap_or_default(),
    ));
    out
}

/// Address space glibc's allocator reserves per thread (an arena of
/// 64 MiB for each thread that allocates), which RLIMIT_AS counts but no
/// estimate of data does.
const ARENA: u64 = 64 << 20;

/// The share of RLIMIT_AS's headroom an estimate may take: the rest is
/// for what estimates leave out (fragmentation, small buffers, stacks).
/// Measured: a 128^3 CPU run estimated at 1.16 GiB needed `ulimit -v` of
/// 1.52 GiB, with 0.06 GiB mapped before it started.
const AS_SHARE: f64 = 0.9;

/// The resource limits of process `pid` (`"self"` or a number), less what
/// it already maps: RLIMIT_AS against its `VmSize` (less an arena for each
/// thread a run will start, and with [`AS_SHARE`]), RLIMIT_DATA against
/// its `VmData`. Unlimited ones are left out.
pub fn process_limits(pid: &str) -> Vec<HostLimit> {
    let (Some(limits), Some(status)) = (
        read(&format!("/proc/{pid}/limits")),
        read(&format!("/proc/{pid}/status")),
    ) else {
        return Vec::new();
    };
    [
        ("Max address space", "VmSize:", "ulimit -v (RLIMIT_AS)"),
        ("Max data size", "VmData:", "ulimit -d (RLIMIT_DATA)"),
    ]
    .iter()
    .filter_map(|(limit, used, what)| {
        let max = soft_limit(&limits, limit)?;
        let used = field(&status, used).unwrap_or(0).saturating_mul(1024);
        let mut bytes = max.saturating_sub(used);
        if limit.starts_with("Max address") {
            // The threads a run will have (a worker per core, the
            // interrupt handler's, two more, and the outputs' early
            // writer), less those already there (their arenas are in
            // VmSize).
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
            let now = field(&status, "Threads:").unwrap_or(1);
            let arenas = ARENA * (cores + 4).saturating_sub(now);
            bytes = (bytes.saturating_sub(arenas) as f64 * AS_SHARE) as u64;
        }
        Some(HostLimit {
            bytes,
            what: format!("{what} of {:.2} GiB", super::gib(max)),
        })
    })
    .collect()
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The number of a `Name:  123 kB` field of /proc/meminfo or
/// /proc/PID/status (KiB for sizes).
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The soft limit of row `name` of /proc/PID/limits, in bytes; `None` when
/// unlimited or absent.
fn soft_limit(limits: &str, name: &str) -> Option<u64> {
    let rest = limits.lines().find(|l| l.starts_with(name))?[name.len()..].trim_start();
    rest.split_whitespace().next()?.parse().ok()
}

/// The memory limits of the cgroups in `proc_cgroup` (the text of
/// /proc/self/cgroup), v2 and v1, from the process's own up to the root.
fn cgroup_limits(proc_cgroup: &str) -> Vec<HostLimit> {
    let mut out = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (base, max, current, inactive) = if id == "0" && controllers.is_empty() {
            let unified = Path::new("/sys/fs/cgroup/unified");
            let base = if unified.join("cgroup.controllers").exists() {
                unified.to_path_buf()
            } else {
                PathBuf::from("/sys/fs/cgroup")
            };
            (base, "memory.max", "memory.current", "inactive_file")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                PathBuf::from("/sys/fs/cgroup/memory"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            )
        } else {
            continue;
        };
        for dir in cgroup_dirs(&base, path) {
            let number = |f: &str| read(dir.join(f).to_str()?)?.trim().parse::<u64>().ok();
            // "max" (v2) does not parse: no limit.
            let Some(limit) = number(max) else { continue };
            let used = number(current).unwrap_or(0);
            let cache = read(dir.join("memory.stat").to_str().unwrap_or_default())
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix(inactive)?.trim().parse::<u64>().ok())
                })
                .unwrap_or(0);
            out.push(HostLimit {
                bytes: limit.saturating_sub(used.saturating_sub(cache)),
                what: format!(
                    "the cgroup memory limit of {:.2} GiB ({})",
                    super::gib(limit),
                    dir.join(max).display()
                ),
            });
        }
    }
    out
}

/// The folders of cgroup `path` under the mount `base` and of each cgroup
/// above it; only `base` when the process's own is not visible (a cgroup
/// namespace mounts the process's cgroup as the root).
fn cgroup_dirs(base: &Path, path: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let own = base.join(path.trim_start_matches('/'));
    if own.is_dir() {
        let mut d = own.as_path();
        while d.starts_with(base) && d != base {
            dirs.push(d.to_path_buf());
            match d.parent() {
                Some(p) => d = p,
                None => break,
            }
        }
    }
    if base.is_dir() {
        dirs.push(base.to_path_buf());
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max data size             unlimited            unlimited            bytes     \n\
                      Max address space         4096000000           unlimited            bytes     \n";
        assert_eq!(soft_limit(limits, "Max address space"), Some(4_096_000_000));
        assert_eq!(soft_limit(limits, "Max data size"), None);
        let status = "Name:\trecon\nVmSize:\t  123456 kB\nVmData:\t    2048 kB\n";
        assert_eq!(field(status, "VmSize:"), Some(123_456));
        assert_eq!(field(status, "VmData:"), Some(2048));
        assert_eq!(field(status, "VmRSS:"), None);
    }

    #[test]
    fn this_process_has_a_limit_and_ulimits_are_seen() {
        // Linux always has MemAvailable; the binding limit is at most it.
        let all = machine_limits();
        let mem = all
            .iter()
            .find(|l| l.what.contains("MemAvailable"))
            .unwrap();
        assert!(host_limit().unwrap().bytes <= mem.bytes);
        // A child under `ulimit -v` sees RLIMIT_AS as its binding limit.
        let out = std::process::Command::new("sh")
            .args(["-c", "ulimit -v 400000 && cat /proc/self/limits"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(soft_limit(&text, "Max address space"), Some(400_000 * 1024));
    }

    #[test]
    fn cgroup_lines_name_their_files() {
        // v1 and v2 lines are recognised; other controllers are not.
        let none = cgroup_limits("3:cpuset:/\n1:cpu:/\n");
        assert!(none.is_empty(), "{none:?}");
        for l in cgroup_limits(&read("/proc/self/cgroup").unwrap_or_default()) {
            assert!(l.what.contains("/sys/fs/cgroup"), "{l:?}");
        }
    }
}
