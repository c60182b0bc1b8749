//! CPU pinning (issue 24 item 4): `--server-cpus LIST` and `--client-cpus LIST`, in `taskset -c`
//! list syntax (`0`, `2-15`, `0,2`, `0-7:2`).
//!
//! The bench process pins itself with `sched_setaffinity` before its runtime starts, so every
//! thread it makes and every process it spawns (the W3 children, `redis-benchmark`) inherits the
//! client set. The servers it starts are pinned between `fork` and `exec` (also
//! `sched_setaffinity`), to the server set, or, where none is given, to the CPUs this process
//! had at start (so that a server never inherits the client set by accident).

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::OnceLock;

use crate::util::Result;

/// The pinning of one invocation.
#[derive(Clone, Debug, Default)]
pub struct Pinning {
    /// CPUs for the servers the bench starts (a cluster's masters take them round robin).
    pub server: Option<Vec<usize>>,
    /// CPUs for the bench process and its children.
    pub client: Option<Vec<usize>>,
}

static PINNING: OnceLock<Pinning> = OnceLock::new();
/// The CPUs this process could run on at start, before any pinning.
static ORIGINAL: OnceLock<Vec<usize>> = OnceLock::new();

/// Parses a `taskset -c` CPU list: comma-separated `N`, `A-B` or `A-B:STRIDE`, ascending
/// duplicates removed.
pub fn parse_cpus(list: &str) -> Result<Vec<usize>> {
    let bad = |why: &str| format!("bad CPU list {list:?}: {why} (taskset syntax: 0 | 2-15 | 0,2)");
    let mut cpus = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(bad("empty item").into());
        }
        let (range, stride) = match item.split_once(':') {
            Some((r, s)) => (
                r,
                s.parse::<usize>()
                    .ok()
                    .filter(|&s| s > 0)
                    .ok_or_else(|| bad(&format!("stride {s:?} is not a positive number")))?,
            ),
            None => (item, 1),
        };
        let num = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| bad(&format!("{s:?} is not a CPU number")))
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None if stride == 1 => (num(range)?, num(range)?),
            None => return Err(bad("a stride needs a range").into()),
        };
        if lo > hi {
            return Err(bad(&format!("range {lo}-{hi} runs backwards")).into());
        }
        if hi >= libc::CPU_SETSIZE as usize {
            return Err(bad(&format!("CPU {hi} is beyond {}", libc::CPU_SETSIZE)).into());
        }
        cpus.extend((lo..=hi).step_by(stride));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// `0-3,5,7-8`: the shortest `taskset -c` spelling of an ascending list.
pub fn format_cpus(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs the calling thread may run on (`sched_getaffinity`).
fn current_affinity() -> Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(format!("sched_getaffinity: {}", std::io::Error::last_os_error()).into());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE and `set` is initialised.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: parse_cpus keeps every CPU below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Checks both sets against the CPUs this process may use, records them, and pins the calling
/// thread (call it from `main` before any other thread exists) to the client set.
pub fn init(p: Pinning) -> Result<()> {
    let available = current_affinity()?;
    for (what, cpus) in [("--server-cpus", &p.server), ("--client-cpus", &p.client)] {
        if let Some(cpus) = cpus {
            if let Some(c) = cpus.iter().find(|c| !available.contains(c)) {
                return Err(format!(
                    "{what}: CPU {c} is not available on this machine (this process may use CPUs {})",
                    format_cpus(&available)
                )
                .into());
            }
        }
    }
    if let Some(cpus) = &p.client {
        let set = cpu_set(cpus);
        // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            return Err(format!(
                "--client-cpus {}: sched_setaffinity: {}",
                format_cpus(cpus),
                std::io::Error::last_os_error()
            )
            .into());
        }
    }
    let _ = ORIGINAL.set(available);
    let _ = PINNING.set(p);
    Ok(())
}

/// The pinning in force (none before [`init`]).
pub fn pinning() -> Pinning {
    PINNING.get().cloned().unwrap_or_default()
}

/// Whether either side is pinned.
pub fn pinned() -> bool {
    let p = pinning();
    p.server.is_some() || p.client.is_some()
}

/// The CPUs of the `index`-th server the bench starts: one CPU of the server set, round robin
/// (a cluster's masters get a core each), or the whole original set when no server set is given.
pub fn server_cpus(index: usize) -> Option<Vec<usize>> {
    match (pinning().server, ORIGINAL.get()) {
        (Some(s), _) if !s.is_empty() => Some(vec![s[index % s.len()]]),
        (_, Some(orig)) if pinning().client.is_some() => Some(orig.clone()),
        _ => None,
    }
}

/// Pins a server command about to be spawned to [`server_cpus`]`(index)`, between fork and exec.
pub fn pin_server(cmd: &mut Command, index: usize) {
    if let Some(cpus) = server_cpus(index) {
        let set = cpu_set(&cpus);
        // SAFETY: the closure only calls sched_setaffinity (a plain system call, async-signal
        // safe) on a set built before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// `server CPUs 0 (round robin over a cluster's masters), client CPUs 1`, for the run header.
pub fn describe() -> String {
    let p = pinning();
    let side = |s: &Option<Vec<usize>>| match s {
        Some(c) => format_cpus(c),
        None => "unpinned".into(),
    };
    if !pinned() {
        return "no CPU pinning".into();
    }
    format!(
        "server CPUs {} (a cluster's masters round robin), client CPUs {}",
        side(&p.server),
        side(&p.client)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_taskset_lists() {
        assert_eq!(parse_cpus("0").unwrap(), vec![0]);
        assert_eq!(parse_cpus("2-5").unwrap(), vec![2, 3, 4, 5]);
        assert_eq!(parse_cpus("5,0,2-3,3").unwrap(), vec![0, 2, 3, 5]);
        assert_eq!(parse_cpus("0-8:4").unwrap(), vec![0, 4, 8]);
        for bad in ["", "a", "3-1", "1,", "0-4:0", "4:2", "-1", "99999"] {
            assert!(parse_cpus(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_cpu_the_process_lacks_is_refused() {
        let e = init(Pinning {
            server: Some(vec![1023]),
            client: None,
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--server-cpus: CPU 1023 is not available"),
            "{e}"
        );
        assert!(PINNING.get().is_none(), "recorded despite the refusal");
    }

    #[test]
    fn formats_ranges() {
        assert_eq!(format_cpus(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(format_cpus(&[1]), "1");
        assert_eq!(format_cpus(&[]), "");
        for s in ["0", "2-15", "0,2", "0-3,5,7-8"] {
            assert_eq!(format_cpus(&parse_cpus(s).unwrap()), s);
        }
    }
}
