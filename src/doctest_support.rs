//! The plumbing of the documentation's examples, hidden from the docs
//! (`redisson_lock::__doctest`): a server to run against and a connected [`Client`]. Not part of
//! the API: it may change in any release.
//!
//! The server is `REDIS_URL` when set, else a throwaway `redis-server` started on a free loopback
//! port the first time an example asks (no persistence), one per process: each doc test is a
//! process of its own. It is started under `sh`, which kills it once the test process's end of
//! its stdin closes, so the server goes when the process does, however it ends.

use std::error::Error;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::{multi::RedLock, shared::Client};

/// What an example's body returns: any error fails the example.
pub type Outcome = Result<(), Box<dyn Error>>;

/// Runs `example` with a connected [`Client`] on a current-thread runtime (`REDIS_URL` set to its
/// server, for examples that connect themselves), and fails the example (exit status 1) when it
/// returns an error. Then the clients of [`client`] are shut down, so that on a shared server
/// (`REDIS_URL`) no hold outlives its example.
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// let guard = client.get_lock("doctest:run").lock().await?;
/// guard.unlock().await?;
/// # Ok(()) })
/// ```
pub fn run<F, Fut>(example: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = Outcome>,
{
    set_redis_url();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => fail(&format!("no tokio runtime for the example: {e}")),
    };
    runtime.block_on(async move {
        let client = client().await;
        if let Err(e) = example(client).await {
            fail(&format!("the example failed: {e:?}"));
        }
        let clients = std::mem::take(&mut *CLIENTS.lock().unwrap_or_else(|e| e.into_inner()));
        for client in clients {
            client.shutdown().await;
        }
    });
}

/// The clients [`client`] made, which [`run`] shuts down at the end.
static CLIENTS: Mutex<Vec<Client>> = Mutex::new(Vec::new());

/// Another [`Client`] of the examples' server (an example with two clients), from inside
/// [`run`].
pub async fn client() -> Client {
    match Client::connect(&url()).await {
        Ok(client) => {
            CLIENTS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(client.clone());
            client
        }
        Err(e) => fail(&format!("cannot connect to the doc-test server: {e}")),
    }
}

/// A [`RedLock`] over the locks `<name>:1`, `<name>:2` and `<name>:3` of `client`: one server
/// stands in for three masters.
pub fn redlock(client: &Client, name: &str) -> RedLock {
    match RedLock::new((1..=3).map(|i| client.get_lock(format!("{name}:{i}")))) {
        Ok(redlock) => redlock,
        Err(e) => fail(&format!("no RedLock: {e}")),
    }
}

/// Runs `example` with a connected [`blocking::Client`](crate::blocking::Client), and fails the
/// example (exit status 1) when it returns an error; then shuts the client down.
#[cfg(feature = "blocking")]
pub fn blocking<F>(example: F)
where
    F: FnOnce(crate::blocking::Client) -> Outcome,
{
    set_redis_url();
    let client = match crate::blocking::Client::connect(&url()) {
        Ok(client) => client,
        Err(e) => fail(&format!("cannot connect to the doc-test server: {e}")),
    };
    if let Err(e) = example(client.clone()) {
        fail(&format!("the example failed: {e:?}"));
    }
    let _ = client.shutdown();
}

/// The examples' server: `REDIS_URL` when set, else a throwaway `redis-server` started now (once
/// per process).
pub fn url() -> String {
    if let Some(url) = std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()) {
        return url;
    }
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    match SERVER.get_or_init(Server::start) {
        Ok(server) => server.url.clone(),
        Err(e) => fail(e),
    }
}

/// Points `REDIS_URL` at [`url`] unless it is set, for examples that read it themselves (the
/// README's `main`); `run` and `blocking` call it first.
pub fn set_redis_url() {
    if std::env::var_os("REDIS_URL").is_none_or(|u| u.is_empty()) {
        std::env::set_var("REDIS_URL", url());
    }
}

/// A throwaway server; dropping `_wrapper` (never: it lives in a static) or the process ending
/// closes the wrapper's stdin, and the wrapper kills the server.
#[derive(Debug)]
struct Server {
    url: String,
    _wrapper: Child,
}

impl Server {
    fn start() -> Result<Server, String> {
        let mut last = String::new();
        // A port found free can be taken by another process before the server binds it: try
        // another one then.
        for _ in 0..3 {
            match Server::start_once() {
                Ok(server) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn start_once() -> Result<Server, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let script = "redis-server --port \"$1\" --bind 127.0.0.1 --save '' --appendonly no \
                      >/dev/null & pid=$!; read _; kill $pid";
        let mut wrapper = Command::new("sh")
            .args(["-c", script, "sh", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start sh for redis-server: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if answers_ping(port) {
                return Ok(Server {
                    url: format!("redis://127.0.0.1:{port}/"),
                    _wrapper: wrapper,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(wrapper.stdin.take());
        let _ = wrapper.wait();
        Err(format!(
            "redis-server did not answer on port {port} within 10 s (is it installed? \
             or set REDIS_URL)"
        ))
    }
}

/// Whether a server on `port` answers `PING`.
fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

/// Fails the example with `message`: a doc test whose process exits with a failure status fails.
fn fail(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(1)
}
