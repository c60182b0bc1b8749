//! Small formatting helpers shared by the commands: durations, timestamps, aligned rows.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Failure;

/// Exit status when stdout was closed under the command (a broken pipe: `| head` read what it
/// wanted and exited): 128 + SIGPIPE, what a shell reports for a Unix tool killed by SIGPIPE.
pub const EXIT_STDOUT_CLOSED: u8 = 141;

/// Set by [`out`] when a write found stdout closed.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` on stdout (and flushes it). Every command writes its stdout through here.
///
/// A closed stdout (`EPIPE`) ends the command: the error goes up like any other, and `main`,
/// seeing [`stdout_closed`], exits [`EXIT_STDOUT_CLOSED`] without a word. Why not restore
/// SIGPIPE's default action at start instead (the C tools' way, same status in a shell): it
/// would apply to every file descriptor, and a write to a Redis socket whose server went away
/// may raise SIGPIPE too (a `writev` does; only `send` with `MSG_NOSIGNAL` does not): `watch`,
/// which must outlive a server restart, would be killed by it. Rust's ignored SIGPIPE turns both
/// into `EPIPE` errors, and only stdout's ends the command.
pub fn out(text: &str) -> crate::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::SeqCst);
            Err(Failure("stdout was closed".into()))
        }
        Err(e) => Err(Failure(format!("cannot write to stdout: {e}"))),
    }
}

/// `eprintln!` that never panics: a line for stderr, lost if stderr is closed (`2>&-`, a
/// closed terminal, a dead log collector), where `eprintln!` would panic mid-command, before a
/// force-unlock's audit line or a `run`'s release. Every command writes stderr through here.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::err_line(&format!($($arg)*))
    };
}
pub(crate) use errln;

/// [`errln`]'s write: `text` and a newline on stderr, errors ignored.
pub fn err_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// [`out`] of `text` and a newline.
pub fn line(text: &str) -> crate::Result<()> {
    out(&format!("{text}\n"))
}

/// Whether a write to stdout found it closed.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::SeqCst)
}

/// Milliseconds since the Unix epoch, by this machine's clock (Redisson's fair-lock deadlines are
/// client-clock epoch milliseconds too).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A `PTTL`-style value for people: `-1` no expiry, `-2` gone, else seconds with a unit.
pub fn ttl(ms: i64) -> String {
    match ms {
        -1 => "no expiry".to_owned(),
        ms if ms < 0 => "gone".to_owned(),
        ms if ms < 1_000 => format!("{ms}ms"),
        ms if ms < 120_000 => format!("{:.1}s", ms as f64 / 1000.0),
        ms if ms < 7_200_000 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        ms => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// An optional TTL: `-` when absent.
pub fn opt_ttl(ms: Option<i64>) -> String {
    ms.map(ttl).unwrap_or_else(|| "-".to_owned())
}

/// A time remaining until `deadline_ms` (epoch ms), negative when overdue.
pub fn remaining(remaining_ms: i64) -> String {
    if remaining_ms < 0 {
        format!("overdue by {}", ttl(-remaining_ms))
    } else {
        format!("in {}", ttl(remaining_ms))
    }
}

/// `2026-01-31T12:34:56.789Z` for an epoch-milliseconds instant (UTC).
pub fn timestamp(epoch_ms: i64) -> String {
    let secs = epoch_ms.div_euclid(1000);
    let ms = epoch_ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day count.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Rows of cells printed with every column but the last padded to its widest cell.
pub fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Prints `value` as one line of JSON.
pub fn print_json<T: serde::Serialize>(value: &T) -> crate::Result<()> {
    line(&serde_json::to_string(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T12:34:56.789Z (a leap day).
        assert_eq!(timestamp(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    fn ttls_read_well() {
        assert_eq!(ttl(-1), "no expiry");
        assert_eq!(ttl(-2), "gone");
        assert_eq!(ttl(250), "250ms");
        assert_eq!(ttl(29_800), "29.8s");
        assert_eq!(ttl(300_000), "5m00s");
    }

    #[test]
    fn tables_align() {
        let t = table(&[
            vec!["a".into(), "bb".into(), "c".into()],
            vec!["ddd".into(), "e".into(), "f".into()],
        ]);
        assert_eq!(t, "a    bb  c\nddd  e   f\n");
    }
}
