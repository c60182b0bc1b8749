//! What every command that changes state shares (`force-unlock`, the synchronizers' writes):
//! the question on stderr with what is there now and where (unless `--yes`), the exit status
//! of a no, and one audit line per change, on stderr and appended to `--audit-log FILE`.

use std::io::{BufRead, Write};
use std::path::Path;

use crate::target::Target;
use crate::{Failure, Result};

/// The prompt was answered no, or stdin closed: nothing changed.
pub const EXIT_ABORTED: u8 = 4;

/// Shows `shown` (what is there now: one line each) under the server it is on, on stderr,
/// asks `question [y/N]` and reads the answer from stdin: `y` or `yes` is yes; anything else,
/// an empty line or the end of input is no.
pub fn confirm(target: &Target, shown: &[String], question: &str) -> Result<bool> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "{}", target.server.line())?;
    for line in shown {
        writeln!(err, "{line}")?;
    }
    write!(err, "{question} [y/N] ")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let answer = answer.trim().to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}

/// What one change did, for its audit line.
pub struct Audit<'a> {
    /// `force-unlock`, `semaphore set`, ...
    pub command: &'a str,
    /// The key's name.
    pub target: &'a str,
    /// The kind it was found to be (`reentrant`, `semaphore`, ... or `none`).
    pub kind: &'a str,
    /// What was removed or set, and from what: `outcome`, `from`, `to`, ... in this order.
    pub details: Vec<(&'a str, String)>,
}

/// Writes one audit line on stderr and appends it to `log` when given: when, what, where (the
/// URL, topology and the server read), what was removed or set and from what, and who ran it
/// (the OS user and host).
pub fn audit(target: &Target, log: Option<&Path>, change: Audit<'_>) -> Result<()> {
    let server = &target.server;
    let node = &server.node;
    let mut line = format!(
        "audit: time={} command={} target={} kind={} server={} topology={} node={} role={} version={}",
        humantime::format_rfc3339_millis(std::time::SystemTime::now()),
        value(change.command),
        value(change.target),
        change.kind,
        server.url,
        server.topology,
        node.address,
        node.role.as_deref().unwrap_or("?"),
        value(&format!(
            "{} {}",
            node.name.as_deref().unwrap_or("?"),
            node.version.as_deref().unwrap_or("?")
        )),
    );
    for (key, v) in &change.details {
        // The outcome is prose (`refused: held by others now`): always quoted.
        let v = if *key == "outcome" {
            format!("{v:?}")
        } else {
            value(v)
        };
        line.push_str(&format!(" {key}={v}"));
    }
    line.push_str(&format!(" operator={}@{}", user(), hostname()));
    crate::output::errln!("{line}");
    if let Some(path) = log {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                Failure(format!(
                    "cannot write the audit log {}: {e}",
                    path.display()
                ))
            })?;
        writeln!(file, "{line}")?;
    }
    Ok(())
}

/// A value as it goes in the audit line: quoted when it has a space or a quote.
fn value(v: &str) -> String {
    if v.is_empty() || v.contains([' ', '"', '=']) {
        format!("{v:?}")
    } else {
        v.to_owned()
    }
}

/// The operator's OS user (`$USER`, `$LOGNAME`), or `?`.
fn user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "?".into())
}

/// This machine's host name (`/proc/sys/kernel/hostname`, `$HOSTNAME`), or `?`.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_are_quoted() {
        assert_eq!(value("removed"), "removed");
        assert_eq!(value("semaphore set"), "\"semaphore set\"");
        assert_eq!(value("a=b"), "\"a=b\"");
    }
}
