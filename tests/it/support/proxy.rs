//! A small fault-injection TCP proxy for loopback tests: clients connect to the proxy's port,
//! the proxy forwards to a redis-server, and the test switches the fault mode at run time.
//!
//! * [`Mode::Pass`]: forward both ways.
//! * [`Mode::Delay`]: forward each chunk after a fixed delay (order kept).
//! * [`Mode::Blackhole`]: accept and hold bytes, forward nothing, until the mode changes
//!   (like a partition that heals: held bytes are delivered late; never dropped, which would
//!   desynchronise the RESP stream).
//! * [`Mode::Refuse`]: existing connections pass; new ones are closed on accept.
//! * [`Mode::Reset`]: close every connection and refuse new ones.
//!
//! Orthogonally, [`Proxy::drop_reply_after`] arms a one-shot trap: the next client request
//! containing a byte pattern is forwarded, then the server's next reply on that connection is
//! swallowed and the connection closed: the request ran, the client cannot know (the
//! ambiguous-outcome case). [`Proxy::cut_before`] arms the other one-shot trap: the next request
//! containing the pattern is not forwarded and the connection is closed (the request never ran).
//!
//! [`Proxy::hold_closes`] keeps the server's side of each connection open after its client
//! closes it (until the proxy is dropped): a connection a client drops stays in `CLIENT LIST`
//! as the server last saw it, as it does for a while when the close reaches the server late.
//!
//! Each connection is two pump tasks; state is one `watch` channel plus the trap. Every task
//! ends when the proxy is dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

/// What the proxy does with traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Delay(Duration),
    Blackhole,
    Refuse,
    Reset,
}

struct State {
    mode: watch::Sender<(Mode, u64)>,
    /// Armed trap: the request pattern, and whether the request goes up (its reply is then
    /// swallowed) or not (the connection is cut before it).
    trap: Mutex<Option<(Vec<u8>, bool)>>,
    fired: AtomicU64,
    fired_notify: Notify,
    accepted: AtomicU64,
    refused: AtomicU64,
    hold_closes: std::sync::atomic::AtomicBool,
    /// `ip:port` of the proxy's end of each server connection, as `CLIENT LIST` shows it.
    upstream: Mutex<Vec<String>>,
}

/// A running proxy to `127.0.0.1:<upstream>`.
pub struct Proxy {
    pub port: u16,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy in [`Mode::Pass`] on a free loopback port.
    pub async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            mode: watch::channel((Mode::Pass, 0)).0,
            trap: Mutex::new(None),
            fired: AtomicU64::new(0),
            fired_notify: Notify::new(),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            hold_closes: Default::default(),
            upstream: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            let mut conns: Vec<JoinHandle<()>> = Vec::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    // E.g. out of file descriptors: don't spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                conns.retain(|c| !c.is_finished());
                let mode = st.mode.borrow().0;
                if matches!(mode, Mode::Refuse | Mode::Reset) {
                    st.refused.fetch_add(1, Ordering::Relaxed);
                    drop(client);
                    continue;
                }
                st.accepted.fetch_add(1, Ordering::Relaxed);
                let st = st.clone();
                conns.push(tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    if let Ok(addr) = server.local_addr() {
                        st.upstream.lock().unwrap().push(addr.to_string());
                    }
                    connection(st, client, server).await;
                }));
            }
        });
        Proxy { port, state, task }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn set(&self, mode: Mode) {
        self.state.mode.send_modify(|(m, generation)| {
            *m = mode;
            *generation += 1;
        });
    }

    pub fn mode(&self) -> Mode {
        self.state.mode.borrow().0
    }

    /// Arms the one-shot trap: the next request containing `pattern` is forwarded, the server's
    /// next reply on that connection is swallowed and the connection is closed.
    pub fn drop_reply_after(&self, pattern: &[u8]) {
        *self.state.trap.lock().unwrap() = Some((pattern.to_vec(), true));
    }

    /// Arms the one-shot cut: the next request containing `pattern` is not forwarded, and the
    /// connection is closed (counted with the swallowed replies).
    pub fn cut_before(&self, pattern: &[u8]) {
        *self.state.trap.lock().unwrap() = Some((pattern.to_vec(), false));
    }

    /// How many replies the trap has swallowed so far.
    pub fn dropped_replies(&self) -> u64 {
        self.state.fired.load(Ordering::SeqCst)
    }

    /// Waits (at most `within`) until the trap has fired `n` times in all.
    pub async fn wait_dropped(&self, n: u64, within: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.state.fired_notify.notified();
                if self.dropped_replies() >= n {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(within, wait).await.is_ok()
    }

    /// From now on, a connection its client closes stays open on the server's side until the
    /// proxy is dropped.
    pub fn hold_closes(&self) {
        self.state.hold_closes.store(true, Ordering::SeqCst);
    }

    /// The server's view of every connection made through the proxy: `ip:port` as the `addr`
    /// of `CLIENT LIST`.
    pub fn upstream_addrs(&self) -> Vec<String> {
        self.state.upstream.lock().unwrap().clone()
    }

    /// Connections accepted so far (reconnects show up here).
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::Relaxed)
    }

    /// Connections closed on accept (in `Refuse` or `Reset` mode) so far.
    pub fn refused(&self) -> u64 {
        self.state.refused.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        // Pumps see the reset and end.
        self.set(Mode::Reset);
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// One proxied connection: two pumps; the connection ends when either ends.
async fn connection(state: Arc<State>, client: TcpStream, server: TcpStream) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    // Set by the upstream pump when it forwards a trapped request.
    let (swallow_tx, swallow_rx) = watch::channel(false);
    let up = pump(state.clone(), cr, sw, Some(swallow_tx), None);
    let down = pump(state.clone(), sr, cw, None, Some(swallow_rx));
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
    // Dropping both halves closes both sockets.
}

/// Copies `from` to `to` under the current mode. Upstream (`trap_tx`) checks requests against
/// the trap; downstream (`swallow`) swallows the next reply once a trapped request went up.
async fn pump(
    state: Arc<State>,
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    trap_tx: Option<watch::Sender<bool>>,
    swallow: Option<watch::Receiver<bool>>,
) {
    let mut modes = state.mode.subscribe();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Read, unless the mode turns to Reset meanwhile.
        let n = loop {
            if modes.borrow_and_update().0 == Mode::Reset {
                return;
            }
            tokio::select! {
                r = from.read(&mut buf) => match r {
                    // The client closed: the server hears of it now, or (held) at the end.
                    Ok(0) if trap_tx.is_some() && state.hold_closes.load(Ordering::SeqCst) => {
                        swallow_wait(&mut modes).await;
                        return;
                    }
                    Ok(0) | Err(_) => return,
                    Ok(n) => break n,
                },
                changed = modes.changed() => if changed.is_err() { return },
            }
        };
        let chunk = &buf[..n];
        if let Some(rx) = swallow.as_ref() {
            if *rx.borrow() {
                // The reply to the trapped request: swallow it and end the connection.
                state.fired.fetch_add(1, Ordering::SeqCst);
                state.fired_notify.notify_waiters();
                return;
            }
        }
        // Apply the mode to this chunk; a blackhole holds it until the mode changes.
        loop {
            let mode = modes.borrow_and_update().0;
            match mode {
                Mode::Reset => return,
                Mode::Blackhole => {
                    if modes.changed().await.is_err() {
                        return;
                    }
                    continue;
                }
                Mode::Delay(d) => tokio::time::sleep(d).await,
                Mode::Pass | Mode::Refuse => {}
            }
            break;
        }
        let trapped = match trap_tx.as_ref() {
            Some(_) => {
                let mut trap = state.trap.lock().unwrap();
                match trap.as_ref() {
                    Some((p, forward)) if contains(chunk, p) => {
                        let forward = *forward;
                        *trap = None;
                        Some(forward)
                    }
                    _ => None,
                }
            }
            None => None,
        };
        if trapped == Some(false) {
            // Cut before the request: it never reaches the server.
            state.fired.fetch_add(1, Ordering::SeqCst);
            state.fired_notify.notify_waiters();
            return;
        }
        if to.write_all(chunk).await.is_err() {
            return;
        }
        if trapped == Some(true) {
            if let Some(tx) = trap_tx.as_ref() {
                tx.send_replace(true);
            }
            // Forward nothing more from this client: the connection is about to die.
            let _ = swallow_wait(&mut modes).await;
            return;
        }
    }
}

/// Keeps the upstream pump parked (not forwarding) until the connection ends or resets.
async fn swallow_wait(modes: &mut watch::Receiver<(Mode, u64)>) {
    loop {
        if modes.borrow_and_update().0 == Mode::Reset {
            return;
        }
        if modes.changed().await.is_err() {
            return;
        }
    }
}

/// A server, the fault proxy in front of it, and a client connected through the proxy with
/// `config` applied to its `Config`.
pub async fn proxied(
    config: impl FnOnce(redisson_lock::Config) -> redisson_lock::Config,
) -> (super::TestServer, Proxy, redisson_lock::Client) {
    let server = super::TestServer::start();
    let proxy = Proxy::start(server.port).await;
    let client =
        redisson_lock::Client::with_config(config(redisson_lock::Config::new(proxy.url())))
            .await
            .unwrap();
    (server, proxy, client)
}
