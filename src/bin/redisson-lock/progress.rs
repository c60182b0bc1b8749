//! `list`'s progress on stderr (`scanned K key(s), M found`): on a terminal, one line redrawn
//! a few times a second; elsewhere (`--progress`), a line a second.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Progress on stderr: keys scanned and entries found, at most a few times a second.
pub struct Progress {
    on: bool,
    tty: bool,
    scanned: usize,
    found: usize,
    last: Option<Instant>,
}

impl Progress {
    pub fn new(setting: Option<bool>) -> Progress {
        let tty = std::io::stderr().is_terminal();
        Progress {
            on: setting.unwrap_or(tty),
            tty,
            scanned: 0,
            found: 0,
            last: None,
        }
    }

    pub fn page(&mut self, keys: usize) {
        self.scanned += keys;
    }

    pub fn found(&mut self, found: usize) {
        self.found = found;
        let due = self.last.is_none_or(|t| {
            t.elapsed() >= Duration::from_millis(if self.tty { 200 } else { 1000 })
        });
        if self.on && due {
            self.last = Some(Instant::now());
            self.print(false);
        }
    }

    fn print(&self, last: bool) {
        let line = format!("scanned {} key(s), {} found", self.scanned, self.found);
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r{line}{}", if last { "\n" } else { "" })
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }

    pub fn done(&mut self, found: usize) {
        self.found = found;
        if self.on {
            self.print(true);
        }
    }
}
