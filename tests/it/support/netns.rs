//! Real network partitions: Linux network namespaces joined by veth pairs to one bridge.
//!
//! A [`Net`] is a small private network: a "switch" namespace holding a Linux bridge, one
//! namespace per [`Node`] joined to the bridge by a veth pair, and a port for the root namespace
//! (the test process), so the test reaches every node directly. Each `Net` has its own /24 in
//! `10.160.0.0/12` (one address block claimed under a lock file, so parallel tests and
//! concurrent test runs never share one); the root namespace's forwarding is never touched.
//!
//! Faults are real link failures, not a proxy in the path:
//! * [`Net::cut`] takes a node's link down at the switch (the node's side loses carrier and its
//!   packets are dropped; nobody sends a RST or FIN), [`Net::heal`] brings it back: TCP
//!   connections survive as half-open ones and resume by retransmission;
//! * [`Net::isolate`] / [`Net::cut_between`] cut nodes from each other while each still reaches
//!   the rest (bridge port isolation: the isolated ports form *one* group, so one cut set at a
//!   time; this kernel has neither VLAN filtering nor tc classifiers for a finer matrix).
//!
//! Processes run inside a node with [`Node::spawn`] (a thread enters the namespace and forks
//! there, so any spawn function works: holders of any language, servers; build binaries
//! outside it first, as [`Node::spawn_holder`] does: cargo may want the network), [`Node::command`]
//! (`ip netns exec`), or in process with [`Node::runtime`] (a tokio runtime whose threads live
//! in the namespace: a client created there connects from the node). [`Node::start_server`]
//! starts redis-server or valkey-server (the same binary and flags as `TestServer`) on the
//! node's address.
//!
//! Dropping the `Net` kills every process left in its namespaces and deletes them; a sweep when
//! a `Net` is made removes what dead test processes left behind (names carry the owner's pid in
//! the claim file `/run/redisson-lock-netns/<block>`). Without root (`CAP_NET_ADMIN`) or
//! without iproute2's `ip`, [`Net::new`] fails the test with one plain message: these tests
//! must not pass by checking nothing.
//!
//! ```ignore
//! let net = Net::new();
//! let server_node = net.node("server");
//! let holder_node = net.node("holder");
//! let server = server_node.start_server(&[]);
//! let holder = holder_node.spawn(|| Holder::spawn(&spec, path));
//! net.cut(&holder_node);   // packets dropped both ways, no RST
//! net.heal(&holder_node);
//! ```

use std::fs::File;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redisson_lock::{Client, Config};

/// Where claims of address blocks live (one file per block, holding the owner's pid).
const CLAIMS: &str = "/run/redisson-lock-netns";
/// Namespace and link names start with this and the block number.
const PREFIX: &str = "rln";
/// Address blocks: `10.(160 + b / 256).(b % 256).0/24`.
const BLOCKS: u32 = 16 * 256;
/// The port servers listen on inside their node (each node has its own address).
pub const SERVER_PORT: u16 = 6379;

/// Why namespaces cannot be made here, said once, plainly.
fn unavailable(why: &str) -> ! {
    panic!(
        "real network partitions are unavailable on this machine: {why}. These tests need root \
         (CAP_NET_ADMIN) and iproute2's `ip` (scripts/ensure-redis installs it with apt); they \
         fail rather than pass without checking anything"
    )
}

/// Runs `ip args`; its stderr on failure.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "`ip` (iproute2) is not installed".to_owned()
            } else {
                format!("cannot run `ip`: {e}")
            }
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `ip args`, which must succeed (the network is already made: a failure is a harness bug).
fn ip_ok(args: &[&str]) {
    if let Err(e) = ip(args) {
        panic!("{e}");
    }
}

fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Namespaces whose name starts with `prefix`.
fn namespaces(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Kills every process in namespace `ns` (SIGCONT first, for stopped ones) and deletes it.
fn delete_namespace(ns: &str) {
    if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                // SAFETY: signalling a process id we read from the namespace.
                unsafe {
                    libc::kill(pid, libc::SIGCONT);
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
    let _ = ip(&["netns", "delete", ns]);
}

/// Removes block `block`'s namespaces and root link, then its claim.
fn remove_block(block: u32) {
    for ns in namespaces(&format!("{PREFIX}{block}-")) {
        delete_namespace(&ns);
    }
    let _ = ip(&["link", "delete", &format!("{PREFIX}{block}")]);
    let _ = std::fs::remove_file(Path::new(CLAIMS).join(block.to_string()));
}

/// Holds the claims directory's lock while alive (sweeps and claims run one at a time).
struct ClaimsLock(File);

impl ClaimsLock {
    fn take() -> Result<ClaimsLock, String> {
        std::fs::create_dir_all(CLAIMS).map_err(|e| format!("cannot create {CLAIMS}: {e}"))?;
        let f = File::create(Path::new(CLAIMS).join(".lock"))
            .map_err(|e| format!("cannot open {CLAIMS}/.lock: {e}"))?;
        // SAFETY: flock on an open descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!(
                "cannot lock {CLAIMS}/.lock: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(ClaimsLock(f))
    }
}

impl Drop for ClaimsLock {
    fn drop(&mut self) {
        // SAFETY: unlocking the descriptor we locked.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Removes blocks whose owner is dead, and namespaces of blocks nobody claims (under the lock).
fn sweep() {
    let Ok(dir) = std::fs::read_dir(CLAIMS) else {
        return;
    };
    let mut claimed = Vec::new();
    for e in dir.filter_map(|e| e.ok()) {
        let Some(block) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let owner: i32 = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if pid_alive(owner) {
            claimed.push(block);
        } else {
            remove_block(block);
        }
    }
    for ns in namespaces(PREFIX) {
        let block = ns[PREFIX.len()..]
            .split('-')
            .next()
            .and_then(|b| b.parse::<u32>().ok());
        if block.is_some_and(|b| !claimed.contains(&b)) {
            delete_namespace(&ns);
        }
    }
}

/// A private network of namespaces on one bridge; everything it made goes on drop.
pub struct Net {
    block: u32,
    /// `10.a.b` of this network's /24.
    net: [u8; 3],
    next_host: AtomicU32,
    nodes: Mutex<Vec<Node>>,
}

impl Net {
    /// A new network with only the root namespace's port on it; fails the test, saying why,
    /// where namespaces cannot be made.
    pub fn new() -> Net {
        match Net::try_new() {
            Ok(net) => net,
            Err(why) => unavailable(&why),
        }
    }

    /// [`Net::new`], or why it cannot be made here.
    pub fn try_new() -> Result<Net, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("the tests do not run as root".into());
        }
        ip(&["-V"])?;
        let block = {
            let _lock = ClaimsLock::take()?;
            sweep();
            Net::claim()?
        };
        let net = Net {
            block,
            net: [10, 160 + (block / 256) as u8, (block % 256) as u8],
            next_host: AtomicU32::new(2),
            nodes: Mutex::new(Vec::new()),
        };
        net.build()?;
        Ok(net)
    }

    /// Claims a free address block (the claims lock held).
    fn claim() -> Result<u32, String> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let start = pid
            .wrapping_mul(31)
            .wrapping_add(COUNTER.fetch_add(7, Ordering::Relaxed));
        for i in 0..BLOCKS {
            let block = (start + i) % BLOCKS;
            let path = Path::new(CLAIMS).join(block.to_string());
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(pid.to_string().as_bytes())
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    return Ok(block);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
            }
        }
        Err("every address block is claimed".into())
    }

    fn switch(&self) -> String {
        format!("{PREFIX}{}-sw", self.block)
    }

    fn addr(&self, host: u32) -> Ipv4Addr {
        Ipv4Addr::new(self.net[0], self.net[1], self.net[2], host as u8)
    }

    /// The switch namespace with its bridge, and the root namespace's port (`.1`).
    fn build(&self) -> Result<(), String> {
        let sw = self.switch();
        ip(&["netns", "add", &sw])?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        let root = format!("{PREFIX}{}", self.block);
        ip(&[
            "link", "add", &root, "type", "veth", "peer", "name", "root", "netns", &sw,
        ])?;
        ip(&["-n", &sw, "link", "set", "root", "master", "br0", "up"])?;
        let cidr = format!("{}/24", self.addr(1));
        ip(&["addr", "add", &cidr, "dev", &root])?;
        ip(&["link", "set", &root, "up"])?;
        Ok(())
    }

    /// The root namespace's address on this network (where the test process is seen from).
    pub fn root_ip(&self) -> Ipv4Addr {
        self.addr(1)
    }

    /// A new node `name` (letters, digits, `-`; at most 12 characters) on the bridge.
    pub fn node(&self, name: &str) -> Node {
        assert!(
            !name.is_empty()
                && name.len() <= 12
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "node name {name:?}: 1-12 letters, digits or '-'"
        );
        let host = self.next_host.fetch_add(1, Ordering::Relaxed);
        assert!(host < 255, "a Net has at most 253 nodes");
        let ns = format!("{PREFIX}{}-{name}", self.block);
        let port = format!("p{host}");
        let sw = self.switch();
        ip_ok(&["netns", "add", &ns]);
        ip_ok(&[
            "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port, "netns",
            &sw,
        ]);
        ip_ok(&["-n", &sw, "link", "set", &port, "master", "br0", "up"]);
        let ip4 = self.addr(host);
        ip_ok(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{ip4}/24"),
            "dev",
            "eth0",
        ]);
        ip_ok(&["-n", &ns, "link", "set", "eth0", "up"]);
        ip_ok(&["-n", &ns, "link", "set", "lo", "up"]);
        let node = Node(Arc::new(NodeInner {
            name: name.to_owned(),
            ns,
            ip: ip4,
            port,
        }));
        self.nodes.lock().unwrap().push(node.clone());
        node
    }

    /// Takes `node`'s link down at the switch: its packets (both ways) are dropped from now on,
    /// with no RST or FIN to anyone; its connections stay open, half-open, on both ends.
    pub fn cut(&self, node: &Node) {
        ip_ok(&["-n", &self.switch(), "link", "set", &node.0.port, "down"]);
    }

    /// Brings `node`'s link back: TCP retransmits what was dropped, connections resume.
    pub fn heal(&self, node: &Node) {
        ip_ok(&["-n", &self.switch(), "link", "set", &node.0.port, "up"]);
    }

    /// Cuts the `nodes` from each other, each keeping its links to every other node and to the
    /// root namespace (bridge port isolation). One isolated set at a time: this replaces any
    /// earlier set; [`Net::heal_isolation`] ends it.
    pub fn isolate(&self, nodes: &[&Node]) {
        self.heal_isolation();
        for n in nodes {
            self.set_isolated(n, true);
        }
    }

    /// Cuts `a` and `b` from each other only (see [`Net::isolate`]).
    pub fn cut_between(&self, a: &Node, b: &Node) {
        self.isolate(&[a, b]);
    }

    /// Ends [`Net::isolate`]: every node reaches every other again.
    pub fn heal_isolation(&self) {
        for n in self.nodes.lock().unwrap().iter() {
            self.set_isolated(n, false);
        }
    }

    fn set_isolated(&self, node: &Node, on: bool) {
        let mode = if on { "on" } else { "off" };
        ip_ok(&[
            "-n",
            &self.switch(),
            "link",
            "set",
            &node.0.port,
            "type",
            "bridge_slave",
            "isolated",
            mode,
        ]);
    }

    /// Heals every cut and isolation.
    pub fn heal_all(&self) {
        self.heal_isolation();
        for n in self.nodes.lock().unwrap().iter() {
            self.heal(n);
        }
    }
}

impl Default for Net {
    fn default() -> Net {
        Net::new()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _lock = ClaimsLock::take();
        remove_block(self.block);
    }
}

struct NodeInner {
    name: String,
    ns: String,
    ip: Ipv4Addr,
    /// Its veth's name in the switch namespace.
    port: String,
}

/// One namespace on a [`Net`]: a machine with its own address. Cheap to clone.
#[derive(Clone)]
pub struct Node(Arc<NodeInner>);

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Node({} {})", self.0.name, self.0.ip)
    }
}

/// Moves the calling thread into the network namespace `ns`.
fn enter(ns: &str) -> std::io::Result<()> {
    let f = File::open(Path::new("/run/netns").join(ns))?;
    // SAFETY: setns on a namespace file we opened; it affects this thread only.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Node {
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Its namespace's name (for `ip netns exec`).
    pub fn namespace(&self) -> &str {
        &self.0.ns
    }

    pub fn ip(&self) -> Ipv4Addr {
        self.0.ip
    }

    /// Runs `f` on a thread inside this node's namespace: processes it spawns, and sockets it
    /// opens, live in the node (a child inherits the network namespace of the thread that
    /// forks it). E.g. `node.spawn(|| Holder::spawn(&spec, path))`.
    pub fn spawn<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let ns = self.0.ns.clone();
        std::thread::scope(|s| {
            s.spawn(move || {
                enter(&ns).unwrap_or_else(|e| panic!("cannot enter namespace {ns}: {e}"));
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// A holder process (`tests/holder`) in this node. The binary is built first, outside the
    /// namespace (cargo may want the network).
    pub fn spawn_holder(
        &self,
        spec: &super::checker::HolderSpec,
        history: PathBuf,
    ) -> super::checker::Holder {
        super::checker::holder_bin();
        self.spawn(|| super::checker::Holder::spawn(spec, history))
    }

    /// `program` run inside this node by `ip netns exec`.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.0.ns]).arg(program);
        cmd
    }

    /// A tokio runtime whose threads live in this node: a client made in a task spawned on it
    /// connects (and reconnects) from the node. Do every call of such a client on it too.
    pub fn runtime(&self) -> NodeRuntime {
        let ns = self.0.ns.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .on_thread_start(move || {
                enter(&ns).unwrap_or_else(|e| panic!("cannot enter namespace {ns}: {e}"))
            })
            .build()
            .expect("node runtime");
        NodeRuntime(Some(rt))
    }

    /// Starts redis-server (or valkey-server: the same binary choice and flags as `TestServer`)
    /// in this node, listening on its address, port [`SERVER_PORT`], with `extra` arguments.
    pub fn start_server(&self, extra: &[&str]) -> NetServer {
        let mut server = NetServer {
            node: self.clone(),
            child: None,
            dir: tempfile::tempdir().expect("tempdir"),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.spawn();
        server
    }
}

/// A tokio runtime inside a node (see [`Node::runtime`]); shut down on drop.
pub struct NodeRuntime(Option<tokio::runtime::Runtime>);

impl NodeRuntime {
    /// Runs `fut` on the node's runtime; await the handle from anywhere.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.as_ref().unwrap().spawn(fut)
    }
}

impl Drop for NodeRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A redis-server (or valkey-server) inside a node; killed on drop.
pub struct NetServer {
    node: Node,
    child: Option<Child>,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl NetServer {
    fn spawn(&mut self) {
        super::family();
        let ip4 = self.node.ip().to_string();
        let mut cmd = Command::new(super::redis_server_bin());
        super::server_args(&mut cmd, SERVER_PORT, &ip4, self.dir.path())
            .args(["--protected-mode", "no"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = self.node.spawn(|| match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{}", super::INSTALL_HINT),
            Err(e) => panic!("cannot start redis-server: {e}"),
        });
        self.child = Some(child);
        assert!(
            self.ready(Duration::from_secs(10)),
            "redis-server did not come up on {}",
            self.url()
        );
    }

    fn ready(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let client = self.raw();
        while Instant::now() < deadline {
            if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200)) {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    pub fn url(&self) -> String {
        format!("redis://{}:{SERVER_PORT}/", self.node.ip())
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// A raw redis-rs client (from the root namespace).
    pub fn raw(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        super::raw_conn(&self.raw()).await
    }

    pub fn config(&self) -> Config {
        Config::new(self.url())
    }

    /// A client in the root namespace (the test process).
    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::with_config(f(self.config())).await.unwrap()
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts an empty server in the same node.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn pause(&self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid() as i32, libc::SIGSTOP) };
    }

    pub fn resume(&self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid() as i32, libc::SIGCONT) };
    }
}

impl Drop for NetServer {
    fn drop(&mut self) {
        self.resume();
        self.kill();
    }
}
