//! `redisson-lock`: the operator CLI of the `redisson-lock` crate.
//!
//! Inspects, lists, watches and force-unlocks Redisson-compatible locks on a standalone server,
//! a Redis Cluster or a Sentinel-managed master. See `docs/cli.md` for commands, flags, the JSON
//! fields and the exit codes.

mod inspect;
mod list;
mod output;
mod render;
mod target;
mod unlock;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Inspect and operate Redisson-compatible distributed locks on Redis.
#[derive(Debug, Parser)]
#[command(name = "redisson-lock", version, max_term_width = 100)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Where the deployment is, and how to print.
#[derive(Debug, Args)]
pub struct Global {
    /// Redis server URL (`redis://[user:password@]host:port[/db]`, `rediss://` for TLS).
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub url: String,
    /// Redis Cluster seed node URLs (repeat the flag or separate with commas); replaces --url.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        value_delimiter = ',',
        conflicts_with = "sentinel"
    )]
    pub cluster: Vec<String>,
    /// Sentinel URLs (repeat the flag or separate with commas); needs --master.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        value_delimiter = ',',
        requires = "master"
    )]
    pub sentinel: Vec<String>,
    /// Name of the master monitored by the sentinels.
    #[arg(long, global = true, value_name = "NAME", requires = "sentinel")]
    pub master: Option<String>,
    /// TLS: trust this CA (PEM file) for rediss:// URLs instead of the system's CAs.
    #[arg(long, global = true, value_name = "FILE", env = "REDIS_TLS_CA")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// TLS: present this client certificate (PEM file; needs --tls-key), for mutual TLS.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// TLS: the client certificate's private key (PEM file).
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// TLS: accept any server certificate. INSECURE, for test set-ups only.
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Print JSON (stable field names, see docs/cli.md) instead of the human format.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show a lock's kind, holders, TTL, queue, token and waiters.
    Inspect {
        /// The lock name (the Redis key).
        name: String,
    },
    /// List lock-like keys matching a SCAN pattern (every master of a cluster).
    List {
        /// SCAN MATCH pattern.
        #[arg(default_value = "*")]
        pattern: String,
        /// SCAN COUNT hint (keys examined per call).
        #[arg(long, default_value_t = 100)]
        count: u32,
        /// Also list keys that do not look like locks, as kind `unknown`.
        #[arg(long)]
        all: bool,
    },
    /// Print a lock's unlock messages and state changes as they happen.
    Watch {
        /// The lock name.
        name: String,
        /// Stop after this many seconds (default: until Ctrl-C).
        #[arg(long = "for", value_name = "SECONDS", value_parser = seconds)]
        duration: Option<Duration>,
    },
    /// Delete a lock whoever holds it and wake its waiters, as Redisson's forceUnlock.
    ForceUnlock {
        /// The lock name.
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// `--for SECONDS`: a non-negative number of seconds (fractions allowed).
fn seconds(s: &str) -> std::result::Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=1e9).contains(&x) => Ok(Duration::from_secs_f64(x)),
        _ => Err(format!(
            "`{s}` is not a number of seconds between 0 and 1e9"
        )),
    }
}

/// An error for the user: printed on stderr, exit code 1.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

/// The CLI's result type.
pub type Result<T> = std::result::Result<T, Failure>;

fn main() -> ExitCode {
    // Usage errors exit with 2 (clap's default) before anything connects.
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let target = target::Target::connect(&cli.global).await?;
    let json = cli.global.json;
    match cli.command {
        Command::Inspect { name } => {
            // The command layer joins the two: `inspect` reads, `render` formats.
            let found = inspect::inspect(&target, &name).await?;
            if json {
                output::print_json(&found)
            } else {
                print!("{}", render::inspection(&found));
                Ok(())
            }
        }
        Command::List {
            pattern,
            count,
            all,
        } => list::run(&target, &pattern, count, all, json).await,
        Command::Watch { name, duration } => watch::run(&target, &name, duration, json).await,
        Command::ForceUnlock { name, yes } => unlock::run(&target, &name, yes, json).await,
    }
}
