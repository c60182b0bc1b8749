//! Global options: credentials from the environment or a file (never only argv), `-v` tracing
//! on stderr, shell completions.

use std::io::Write;

use crate::cli::*;
use crate::support::*;

/// A server with a password: the CLI finds it in `$REDIS_PASSWORD`, `--password-file` or a
/// URL read from `--url-file`; never printed; a missing file is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_come_from_the_environment_or_a_file() {
    let server = TestServer::start_with(&["--requirepass", "s3cret-pw"]);
    let url = format!("redis://127.0.0.1:{}", server.port);
    let run = |extra: &[&str], env: Option<(&'static str, String)>| {
        let mut a = vec!["--url".to_owned(), url.clone()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(["inspect", "cli:x"].map(String::from));
        async move {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let out = cli_env(&a, &env).await;
            (out.code, out.stdout, out.stderr)
        }
    };
    let (code, _, err) = run(&[], None).await;
    assert_eq!(code, 1, "no password: refused ({err})");
    let (code, out, err) = run(&[], Some(("REDIS_PASSWORD", "s3cret-pw".into()))).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("not locked"), "{out}");

    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "s3cret-pw").unwrap();
    let path = file.path().to_str().unwrap().to_owned();
    let (code, _, err) = run(&["--password-file", &path], None).await;
    assert_eq!(code, 0, "{err}");

    let mut url_file = tempfile::NamedTempFile::new().unwrap();
    writeln!(url_file, "redis://:s3cret-pw@127.0.0.1:{}", server.port).unwrap();
    // The file replaces --url (here a URL without the password).
    let url_file = url_file.path().to_str().unwrap().to_owned();
    let (code, _, err) = run(&["--url-file", &url_file], None).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&[], Some(("REDIS_URL_FILE", url_file))).await;
    assert_eq!(code, 0, "{err}");

    let (code, _, err) = run(&["--password-file", "/nonexistent/pw"], None).await;
    assert_eq!(code, 1);
    assert!(err.contains("cannot read the password file"), "{err}");
    let wrong = run(&[], Some(("REDIS_PASSWORD", "wrong-pw".into()))).await;
    assert_eq!(wrong.0, 1);
    assert!(!wrong.2.contains("wrong-pw"), "{}", wrong.2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_traces_on_stderr_and_completions_need_no_server() {
    let server = TestServer::start();
    let quiet = cli(&args(&server, &["inspect", "cli:v"])).await;
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);
    let loud = cli(&args(&server, &["-v", "inspect", "cli:v"])).await;
    assert_eq!(loud.code, 0);
    assert!(loud.stderr.contains("INFO"), "{}", loud.stderr);
    assert!(loud.stderr.contains("connected"), "{}", loud.stderr);
    assert!(!loud.stderr.contains("DEBUG"), "{}", loud.stderr);
    let louder = cli(&args(&server, &["-vv", "list", "cli:*"])).await;
    assert!(louder.stderr.contains("DEBUG"), "{}", louder.stderr);
    assert!(
        !loud.stdout.contains("redisson_lock::"),
        "traces stay off stdout"
    );

    let out = cli(&["completions".to_owned(), "bash".to_owned()]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("force-unlock"), "{}", out.stdout);
    let out = cli(&["completions".to_owned(), "nosh".to_owned()]).await;
    assert_eq!(out.code, 2);

    // `--help` names every place a password may come from besides argv (`$REDIS_PASSWORD` has
    // no flag, so only this text tells of it).
    let help = cli(&["--help".to_owned()]).await;
    assert_eq!(help.code, 0, "{}", help.stderr);
    // (`REDIS_PASSWORD_FILE` and `REDIS_URL_FILE` are the files' variables: not these.)
    let text = help
        .stdout
        .replace("REDIS_PASSWORD_FILE", "")
        .replace("REDIS_URL_FILE", "");
    for source in [
        "REDIS_URL",
        "--url-file",
        "--password-file",
        "REDIS_PASSWORD",
    ] {
        assert!(
            text.contains(source),
            "--help omits {source}: {}",
            help.stdout
        );
    }
}

/// An ACL user named in the URL with the password from `$REDIS_PASSWORD` or `--password-file`
/// (the documented way to keep it out of argv) authenticates as that user: with the default user
/// off (it failed with `NOAUTH`), and with the default user on but allowed nothing (it silently
/// connected as the default user). A URL with a password of its own beside a second source is
/// an error that shows neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_user_with_a_password_from_a_file_or_the_environment_is_that_user() {
    for default_user in ["off", "on"] {
        let server = TestServer::start();
        let mut raw = server.conn().await;
        let acl = |args: &[&str]| {
            let mut c = redis::cmd("ACL");
            c.arg(args);
            c
        };
        let _: () = acl(&["SETUSER", "ops", "on", ">ops-pw-5521", "+@all", "~*", "&*"])
            .query_async(&mut raw)
            .await
            .unwrap();
        // The default user: off, or on and allowed nothing a CLI command needs.
        let _: () = acl(&[
            "SETUSER",
            "default",
            "resetkeys",
            "-@all",
            "+hello",
            "+auth",
            default_user,
        ])
        .query_async(&mut raw)
        .await
        .unwrap();
        drop(raw);
        let url = format!("redis://ops@127.0.0.1:{}", server.port);
        let run = |extra: &[&str], env: &'static [(&'static str, &'static str)]| {
            let mut a = vec!["--url".to_owned(), url.clone()];
            a.extend(extra.iter().map(|s| s.to_string()));
            a.extend(["inspect", "cli:acl"].map(String::from));
            async move {
                let out = cli_env(&a, env).await;
                (out.code, out.stdout, out.stderr)
            }
        };
        let (code, out, err) = run(&[], &[("REDIS_PASSWORD", "ops-pw-5521")]).await;
        assert_eq!(
            code, 0,
            "default user {default_user}, REDIS_PASSWORD: {err}"
        );
        assert!(out.contains("not locked"), "{out}");
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "ops-pw-5521").unwrap();
        let path = file.path().to_str().unwrap().to_owned();
        let (code, _, err) = run(&["--password-file", &path], &[]).await;
        assert_eq!(
            code, 0,
            "default user {default_user}, --password-file: {err}"
        );
        // Two passwords: refused, neither shown.
        let mut a = vec![
            "--url".to_owned(),
            format!("redis://ops:url-pw-0042@127.0.0.1:{}", server.port),
        ];
        a.extend(["inspect", "cli:acl"].map(String::from));
        let out = cli_env(&a, &[("REDIS_PASSWORD", "ops-pw-5521")]).await;
        let err = out.stderr;
        assert_eq!(out.code, 1, "{err}");
        assert!(err.contains("keep one"), "{err}");
        assert!(
            !err.contains("url-pw-0042") && !err.contains("ops-pw-5521"),
            "{err}"
        );
    }
}
