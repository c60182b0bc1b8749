//! Secrets on error paths: a password never shows in an error, a `Debug` of `Config` or
//! `Client`, or the CLI's output, also for URLs that do not parse (a bad port or scheme, stray
//! characters) or that parse as something else, with passwords holding `@`, `:`, `/` and `%`,
//! alone or among cluster and sentinel URL lists.

use std::time::Duration;

use crate::support::*;
use futures_util::future::join_all;
use redisson_lock::{redact_url, Client, Config};

/// In every password, at both ends: shown, any part of a password shows it.
const MARK: &str = "Zq9x";

/// Passwords with each character that ends or splits a URL's parts; `12/…` reads as a port.
const PASSWORDS: [&str; 6] = [
    "Zq9x@Zq9x",
    "Zq9x:Zq9x",
    "Zq9x/Zq9x",
    "Zq9x%Zq9x",
    "12/Zq9x",
    "Zq9x@:/%Zq9x",
];

/// URLs around a password `{p}`; none reaches a server (port 1 refuses, or it does not parse;
/// the user is a local host name, so a password read as a port sends nothing off the machine).
const SHAPES: [&str; 13] = [
    // A bad port, out of range, not a number.
    "redis://localhost:{p}@127.0.0.1:notaport/",
    "redis://localhost:{p}@127.0.0.1:99999/",
    // A bad scheme or separator (no host at all: parsed as a path, or no scheme).
    "redis:/localhost:{p}@127.0.0.1:1/",
    "redis//localhost:{p}@127.0.0.1:1/",
    "redis:localhost:{p}@127.0.0.1:1",
    "redix://localhost:{p}@127.0.0.1:1/",
    // Stray characters: in the database, the host, the query, an IPv6 address.
    "redis://localhost:{p}@127.0.0.1:1/0x",
    "redis://localhost:{p}@127.0.0.1 :1/",
    "redis://localhost:{p}@127.0.0.1:1/?protocol=resp9",
    "redis://:{p}@[::1:1/",
    // An IP address as the user: with `12/...`, parsed as host and port and a path.
    "redis://127.0.0.1:{p}@127.0.0.1:1/",
    // Parses, refused by our checks; and a plain dead server.
    "rediss://localhost:{p}@127.0.0.1:1/#insecure",
    "redis://localhost:{p}@127.0.0.1:1/",
];

fn urls() -> Vec<String> {
    let mut v = Vec::new();
    for p in PASSWORDS {
        for shape in SHAPES {
            v.push(shape.replace("{p}", p));
        }
    }
    v
}

fn hidden(what: &str, url: &str, text: &str) {
    assert!(
        !text.contains(MARK),
        "{what} of `{url}` shows the password: {text}"
    );
}

/// What connecting with `config` answers: an error, shown and debugged without the password.
async fn connect_error(url: &str, what: &str, config: Config) {
    hidden(
        &format!("{what}: Debug of the Config"),
        url,
        &format!("{config:?}"),
    );
    let config = config.with_connection_timeout(Duration::from_secs(5));
    // A connect still retrying after the bound says nothing: only errors are read.
    let bound = Duration::from_secs(20);
    let Ok(result) = tokio::time::timeout(bound, Client::with_config(config)).await else {
        return;
    };
    let e = match result {
        Ok(client) => panic!("{what}: `{url}` connected: {client:?}"),
        Err(e) => e,
    };
    hidden(&format!("{what}: the error"), url, &e.to_string());
    hidden(
        &format!("{what}: Debug of the error"),
        url,
        &format!("{e:?}"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_error_or_debug_shows_a_password_of_a_url_that_does_not_parse() {
    let urls = urls();
    for url in &urls {
        hidden("redact_url", url, &redact_url(url));
    }
    let mut checks = Vec::new();
    for url in &urls {
        checks.push(connect_error(url, "standalone", Config::new(url.clone())));
        // Among other URLs: first and last of a list.
        checks.push(connect_error(
            url,
            "cluster",
            Config::cluster([url.clone(), "redis://127.0.0.1:1/".to_owned()]),
        ));
        checks.push(connect_error(
            url,
            "sentinel",
            Config::sentinel(["redis://127.0.0.1:1/".to_owned(), url.clone()], "m"),
        ));
    }
    // All at once: each is refused at once, does not parse, or runs into the bound.
    join_all(checks).await;
}

/// A client connected with such a password (percent-encoded in its URL, as it must be to
/// parse) shows none of it in its `Debug`, nor does its `Config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_clients_debug_never_shows_its_password() {
    let password = PASSWORDS[5];
    let server = TestServer::start_with(&["--requirepass", password]);
    let encoded =
        redisson_lock::url_with_password(&format!("redis://127.0.0.1:{}/", server.port), password)
            .unwrap();
    let client = Client::connect(&encoded).await.unwrap();
    hidden("Debug of the Client", &encoded, &format!("{client:?}"));
    let config = Config::new(encoded.clone());
    hidden("Debug of the Config", &encoded, &format!("{config:?}"));
}

/// The CLI: no URL of the list, given as `--url`, in a `--cluster` list or a `--sentinel`
/// list, shows its password on stderr or stdout; each is an error (exit 1 or 2).
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_never_shows_a_password_of_a_url_that_does_not_parse() {
    use crate::cli::cli_env;
    // Every shape, with the passwords in turn (a few processes at a time).
    let mut runs = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        let url = shape.replace("{p}", PASSWORDS[i % PASSWORDS.len()]);
        let dead = "redis://127.0.0.1:1/";
        for how in ["url", "cluster", "sentinel"] {
            let mut a: Vec<String> = match how {
                "url" => vec!["--url".into(), url.clone()],
                "cluster" => vec!["--cluster".into(), format!("{dead},{url}")],
                _ => vec![
                    "--sentinel".into(),
                    format!("{url},{dead}"),
                    "--master".into(),
                    "m".into(),
                ],
            };
            a.extend(["inspect", "x"].map(String::from));
            let url = url.clone();
            runs.push(async move {
                let out = cli_env(&a, &[]).await;
                assert!(
                    out.code == 1 || out.code == 2,
                    "{how} `{url}`: {}",
                    out.code
                );
                hidden(&format!("CLI {how}: stderr"), &url, &out.stderr);
                hidden(&format!("CLI {how}: stdout"), &url, &out.stdout);
            });
        }
    }
    for run in runs {
        run.await;
    }
}
