//! The operator CLI over TLS and as an ACL user (issue 21): `--tls-ca` (and `REDIS_TLS_CA`),
//! `--tls-cert`/`--tls-key` against a server that requires client certificates,
//! `--insecure-skip-tls-verify`, `redis://user:pass@` and `rediss://user:pass@` URLs; a refused
//! certificate is a clear error; the password never shows in output or errors.

use std::process::Stdio;
use std::time::Duration;

use redisson_lock::Config;
use serde_json::Value;

use crate::cli::{cli, command, Out};
use crate::require_tls;
use crate::support::tls::{Pki, TlsServer};
use crate::support::TestServer;

const PASSWORD: &str = "op-secret-7391";

/// Creates the ACL user `operator` (password [`PASSWORD`]) with what the CLI needs.
async fn operator(server: &TestServer) {
    let mut raw = server.conn().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "operator", "on", &format!(">{PASSWORD}")][..])
        .arg(&["+@all", "~*", "&*"][..])
        .query_async(&mut raw)
        .await
        .unwrap();
}

fn no_password(out: &Out) {
    assert!(!out.stdout.contains(PASSWORD), "stdout: {}", out.stdout);
    assert!(!out.stderr.contains(PASSWORD), "stderr: {}", out.stderr);
}

/// `inspect NAME --json` with `args` before it; expects exit 0 and one holder.
async fn inspect_ok(args: &[String], name: &str) {
    let mut all = args.to_vec();
    all.extend(["--json".into(), "inspect".into(), name.into()]);
    let out = cli(&all).await;
    no_password(&out);
    assert_eq!(out.code, 0, "{all:?}: {}", out.stderr);
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["kind"], "reentrant", "{v}");
    assert_eq!(v["holders"].as_array().map(Vec::len), Some(1), "{v}");
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `inspect` over mutual TLS as an ACL user: the CA by flag and by `REDIS_TLS_CA`; without the
/// CA or without the client certificate a TLS error (exit 1) with the redacted URL; a
/// certificate without its key is a usage error; the insecure switch; the same user on the
/// plain port. No output or error carries the password.
#[tokio::test]
async fn cli_over_mutual_tls_as_an_acl_user() {
    require_tls!();
    let pki = Pki::new();
    let server = TlsServer::start(&pki, true);
    operator(&server.plain).await;
    let tls_url = format!(
        "rediss://operator:{PASSWORD}@127.0.0.1:{}/",
        server.tls_port
    );
    let holder =
        redisson_lock::Client::with_config(Config::new(tls_url.clone()).with_tls(pki.client_tls()))
            .await
            .unwrap();
    let _held = holder.get_lock("orders:cli").lock().await.unwrap();
    let (ca, cert, key) = (
        pki.ca.display().to_string(),
        pki.client.cert.display().to_string(),
        pki.client.key.display().to_string(),
    );

    // The CA and the client certificate by flag.
    let base = strings(&[
        "--url",
        &tls_url,
        "--tls-ca",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]);
    inspect_ok(&base, "orders:cli").await;

    // The CA from REDIS_TLS_CA.
    let args = strings(&[
        "--url",
        &tls_url,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--json",
        "inspect",
        "orders:cli",
    ]);
    let out = command(&args)
        .env("REDIS_TLS_CA", &ca)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
        .wait_with_output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("redisson-lock did not exit")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"reentrant\""), "{stdout}");

    // Without the CA: the system's CAs do not know this one; a TLS error, not a hang.
    let args = strings(&[
        "--url",
        &tls_url,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "inspect",
        "orders:cli",
    ]);
    let out = cli(&args).await;
    no_password(&out);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stderr.contains("TLS"), "{}", out.stderr);
    assert!(
        out.stderr.contains("rediss://***@127.0.0.1"),
        "{}",
        out.stderr
    );

    // Without the client certificate: the server refuses the handshake.
    let args = strings(&["--url", &tls_url, "--tls-ca", &ca, "inspect", "orders:cli"]);
    let out = cli(&args).await;
    no_password(&out);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stderr.contains("TLS"), "{}", out.stderr);

    // A certificate without its key is a usage error before anything connects.
    let args = strings(&[
        "--url",
        &tls_url,
        "--tls-cert",
        &cert,
        "inspect",
        "orders:cli",
    ]);
    assert_eq!(cli(&args).await.code, 2);

    // The insecure switch skips the CA check (the server still wants the client certificate).
    #[cfg(feature = "tls-insecure")]
    {
        let insecure = strings(&[
            "--url",
            &tls_url,
            "--insecure-skip-tls-verify",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ]);
        inspect_ok(&insecure, "orders:cli").await;
    }

    // The same user on the plain port: redis://user:pass@.
    let plain_url = format!(
        "redis://operator:{PASSWORD}@127.0.0.1:{}/",
        server.plain.port
    );
    inspect_ok(&strings(&["--url", &plain_url]), "orders:cli").await;
}

/// A wrong password for an ACL user: an authentication error that names the (redacted) URL and
/// never the password, in either format.
#[tokio::test]
async fn a_refused_password_never_shows() {
    let server = TestServer::start();
    operator(&server).await;
    let wrong = "not-the-op-pw-5524";
    let url = format!("redis://operator:{wrong}@127.0.0.1:{}/", server.port);
    for json in [false, true] {
        let mut args = strings(&["--url", &url, "inspect", "orders:x"]);
        if json {
            args.insert(0, "--json".into());
        }
        let out = cli(&args).await;
        assert_eq!(out.code, 1, "{}", out.stdout);
        assert!(!out.stdout.contains(wrong), "stdout: {}", out.stdout);
        assert!(!out.stderr.contains(wrong), "stderr: {}", out.stderr);
        assert!(
            out.stderr.contains("redis://***@127.0.0.1"),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.to_lowercase().contains("auth"),
            "not an authentication error: {}",
            out.stderr
        );
    }
    // The right password for the same user: the lock (not held) reads as not locked.
    let url = format!("redis://operator:{PASSWORD}@127.0.0.1:{}/", server.port);
    let out = cli(&strings(&["--url", &url, "inspect", "orders:x"])).await;
    no_password(&out);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("not locked"), "{}", out.stdout);
}
