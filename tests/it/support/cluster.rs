//! Real Redis Cluster and Sentinel deployments on loopback ports, for the topology tests.
//!
//! `TestCluster`: 3 masters (optionally with one replica each) made with
//! `redis-server --cluster-enabled yes` and `redis-cli --cluster create` (or Valkey's
//! `valkey-server` and `valkey-cli`: `family.rs`); `TestCluster::start_valkey9` runs the pinned
//! Valkey 9.1.2 whatever the switch, for Valkey 9's atomic slot migration.
//! `TestSentinel`: a master, a replica and 3 sentinels (`redis-server <conf> --sentinel`).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::family::valkey9_server_bin;
use super::{family, free_port, redis_cli_bin, redis_server_bin, wait_ready, INSTALL_HINT};

/// A port `p` such that both `p` and the cluster bus port `p + 10000` are free.
fn free_cluster_port() -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = l.local_addr().unwrap().port();
        if p < 55000 && TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair for a cluster node");
}

/// One redis-server process (data node or sentinel) in its own directory.
pub struct Node {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    args: Vec<String>,
    /// The server binary (`redis_server_bin` unless a test pins one).
    bin: String,
}

impl Node {
    /// Starts a node on `port` with `args` and, when given, `conf` as its config file (a
    /// sentinel needs one).
    pub fn spawn(port: u16, args: Vec<String>, conf: Option<String>) -> Node {
        Node::spawn_bin(redis_server_bin(), port, args, conf)
    }

    fn spawn_bin(bin: String, port: u16, args: Vec<String>, conf: Option<String>) -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut node = Node {
            port,
            child: None,
            dir,
            args,
            bin,
        };
        if let Some(conf) = conf {
            std::fs::write(node.dir.path().join("node.conf"), conf).unwrap();
        }
        node.start();
        node
    }

    fn start(&mut self) {
        self.start_with(&[]);
    }

    fn start_with(&mut self, extra: &[String]) {
        family();
        let mut cmd = Command::new(&self.bin);
        let conf = self.dir.path().join("node.conf");
        if conf.exists() {
            cmd.arg(&conf);
        }
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.args)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
            Err(e) => panic!("cannot start redis-server: {e}"),
        };
        self.child = Some(child);
        assert!(
            wait_ready(self.port, Duration::from_secs(10)),
            "node on {} did not come up",
            self.port
        );
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `INFO <section>` of this node (empty when it does not answer).
    pub fn info(&self, section: &str) -> String {
        // A node that refuses connections (restarted, not listening yet) does not answer: it
        // panicked here, mid failover round, under two busy loops.
        let Ok(mut c) = self.try_conn() else {
            return String::new();
        };
        redis::cmd("INFO")
            .arg(section)
            .query(&mut c)
            .unwrap_or_default()
    }

    pub fn conn(&self) -> redis::Connection {
        self.try_conn().unwrap()
    }

    /// [`Node::conn`], or its error. A connect interrupted by a signal (`EINTR`: the test
    /// process reaps its children; seen failing a whole cluster start on a loaded machine) is
    /// tried again.
    pub fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let mut tries = 0;
        loop {
            match client.get_connection_with_timeout(Duration::from_secs(5)) {
                Err(e) if tries < 5 && e.to_string().contains("os error 4") => tries += 1,
                other => return other,
            }
        }
    }

    /// Starts the process again on the same port and directory (after [`Node::kill`]); a
    /// cluster node keeps its `nodes.conf` there and rejoins.
    pub fn restart(&mut self) {
        self.kill();
        self.start();
    }

    /// Starts the process again (after [`Node::kill`]) as a replica of `master_port` from its
    /// first instant: a killed master that came back as a master, empty, until told otherwise
    /// would take the writes of clients that still resolve to it (a split brain outside the
    /// failover rounds' model).
    pub fn restart_as_replica_of(&mut self, master_port: u16) {
        self.kill();
        self.start_with(&[
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            master_port.to_string(),
        ]);
    }

    /// Kills the process (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls a blocking condition every 50 ms until it holds or `within` passes.
/// A failover before replication, played: waits for `master`'s writes to reach a replica
/// (`WAIT 1`), then makes `replica` writable and runs `wipe` there, so the replica alone loses
/// what it wipes (the future master lacks a hold the old one still has).
pub fn lose_on_replica(master: &Node, replica: &Node, wipe: &redis::Cmd) {
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut master.conn())
        .unwrap();
    let _: redis::Value = wipe.query(&mut writable(replica)).unwrap();
}

/// A connection to `replica` made writable (`replica-read-only no`).
pub fn writable(replica: &Node) -> redis::Connection {
    let mut c = replica.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("no")
        .query(&mut c)
        .unwrap();
    c
}

pub fn wait_until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A real Redis Cluster of 3 masters, with `replicas` replicas each.
pub struct TestCluster {
    pub nodes: Vec<Node>,
}

impl TestCluster {
    pub fn start(replicas: usize) -> TestCluster {
        TestCluster::start_with_args(replicas, |_| Vec::new())
    }

    /// [`TestCluster::start`] with `extra(node index)` appended to each node's arguments (the
    /// TLS cluster of `support/tls.rs`).
    pub fn start_with_args(
        replicas: usize,
        extra: impl FnMut(usize) -> Vec<String>,
    ) -> TestCluster {
        TestCluster::start_on(redis_server_bin(), replicas, extra)
    }

    /// [`TestCluster::start`] on the pinned Valkey 9.1.2 (`family::valkey9_server_bin`),
    /// whatever `REDISSON_LOCK_SERVER` says: for the tests of a Valkey 9 feature (atomic slot
    /// migration, [`TestCluster::migrate_slot_atomically`]).
    pub fn start_valkey9(replicas: usize) -> TestCluster {
        TestCluster::start_on(valkey9_server_bin(), replicas, |_| Vec::new())
    }

    /// Starts the nodes and joins them. A `--cluster create` that fails (seen once in a
    /// ci_slice under two busy loops, its output then unseen) is said on stderr with its
    /// output, and the whole start is done once more on fresh nodes and ports.
    fn start_on(
        bin: String,
        replicas: usize,
        mut extra: impl FnMut(usize) -> Vec<String>,
    ) -> TestCluster {
        match TestCluster::try_start_on(bin.clone(), replicas, &mut extra) {
            Ok(cluster) => cluster,
            Err(why) => {
                eprintln!("cluster: --cluster create failed, starting again: {why}");
                TestCluster::try_start_on(bin, replicas, &mut extra)
                    .unwrap_or_else(|why| panic!("--cluster create failed twice: {why}"))
            }
        }
    }

    fn try_start_on(
        bin: String,
        replicas: usize,
        extra: &mut impl FnMut(usize) -> Vec<String>,
    ) -> Result<TestCluster, String> {
        let count = 3 * (1 + replicas);
        let nodes: Vec<Node> = (0..count)
            .map(|i| {
                Node::spawn_bin(
                    bin.clone(),
                    free_cluster_port(),
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "2000",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                    ]
                    .iter()
                    .map(|s| s.to_string())
                    .chain(extra(i))
                    .collect(),
                    None,
                )
            })
            .collect();
        let cli = redis_cli_bin();
        let mut create = Command::new(&cli);
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(n.addr());
        }
        create
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null());
        let out = create
            .output()
            .unwrap_or_else(|e| panic!("{cli} --cluster create: {e}"));
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = text.lines().rev().take(8).collect();
            return Err(format!("{cli}: {}", tail.join(" | ")));
        }
        let cluster = TestCluster { nodes };
        assert!(
            wait_until(Duration::from_secs(30), || cluster.is_ok(replicas)),
            "cluster did not reach state ok"
        );
        Ok(cluster)
    }

    /// Every node reports `cluster_state:ok` and agrees on the replica count.
    fn is_ok(&self, replicas: usize) -> bool {
        self.nodes.iter().all(|n| {
            let Ok(mut c) = n.try_conn() else {
                return false;
            };
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut c)
                .unwrap_or_default();
            if !info.contains("cluster_state:ok") {
                return false;
            }
            if replicas == 0 {
                return true;
            }
            let repl: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut c)
                .unwrap_or_default();
            // Masters see their replica online; replicas see their master link up.
            repl.contains("role:slave") && repl.contains("master_link_status:up")
                || repl.contains(&format!("connected_slaves:{replicas}"))
        })
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT` on the first node).
    pub fn keyslot(&self, key: &str) -> u16 {
        let mut c = self.nodes[0].conn();
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut c)
            .unwrap()
    }

    /// The node currently serving `slot` as master.
    pub fn master_of(&self, slot: u16) -> &Node {
        self.master_seen_by(&self.nodes[0], slot)
    }

    /// The replica of `master` (by its `INFO replication`).
    pub fn replica_of(&self, master: &Node) -> &Node {
        let info = master.info("replication");
        let port: u16 = info
            .lines()
            .find(|l| l.starts_with("slave0:"))
            .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("port=")))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no replica in {info}"));
        self.nodes.iter().find(|n| n.port == port).unwrap()
    }

    /// The node that `seen_by`'s `CLUSTER SLOTS` names as `slot`'s master.
    fn master_seen_by(&self, seen_by: &Node, slot: u16) -> &Node {
        let mut c = seen_by.conn();
        let shards: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut c).unwrap();
        let redis::Value::Array(ranges) = shards else {
            panic!("CLUSTER SLOTS: {shards:?}")
        };
        for r in ranges {
            let redis::Value::Array(items) = r else {
                continue;
            };
            let (
                Some(redis::Value::Int(lo)),
                Some(redis::Value::Int(hi)),
                Some(redis::Value::Array(master)),
            ) = (items.first(), items.get(1), items.get(2))
            else {
                continue;
            };
            if (*lo..=*hi).contains(&i64::from(slot)) {
                let Some(redis::Value::Int(port)) = master.get(1) else {
                    continue;
                };
                return self
                    .nodes
                    .iter()
                    .find(|n| i64::from(n.port) == *port)
                    .expect("master is one of ours");
            }
        }
        panic!("slot {slot} not served");
    }

    fn node_id(node: &Node) -> String {
        let mut c = node.conn();
        redis::cmd("CLUSTER").arg("MYID").query(&mut c).unwrap()
    }

    /// A master other than `slot`'s: where [`TestCluster::start_slot_migration`] moves it.
    pub fn other_master_of(&self, slot: u16) -> &Node {
        self.other_master(self.master_of(slot))
    }

    /// A master other than `from`.
    fn other_master(&self, from: &Node) -> &Node {
        self.nodes
            .iter()
            .find(|n| {
                n.port != from.port && {
                    let mut c = n.conn();
                    let role: redis::Value = redis::cmd("ROLE").query(&mut c).unwrap();
                    matches!(role, redis::Value::Array(ref v) if matches!(v.first(), Some(redis::Value::BulkString(b)) if b == b"master"))
                }
            })
            .expect("another master")
    }

    /// Moves `slot` (and its keys) from its master to another master with Valkey 9's atomic
    /// slot migration: one `CLUSTER MIGRATESLOTS SLOTSRANGE <slot> <slot> NODE <id>` sent to the
    /// source, which streams the slot's keys to the target and hands the slot over in one step
    /// (no `ASK` window, no per-key `MIGRATE`). Returns the new master's port once every node
    /// names it as the slot's master (panics after 30 s). Needs [`TestCluster::start_valkey9`].
    pub fn migrate_slot_atomically(&self, slot: u16) -> u16 {
        let to = self.start_slot_migration(slot);
        let moved = wait_until(Duration::from_secs(30), || {
            self.nodes
                .iter()
                .all(|n| self.master_seen_by(n, slot).port == to)
        });
        assert!(moved, "slot {slot}: every node names {to} as its master");
        to
    }

    /// Starts [`TestCluster::migrate_slot_atomically`]'s migration of `slot` and returns at
    /// once, with the port of the master it goes to.
    pub fn start_slot_migration(&self, slot: u16) -> u16 {
        let from = self.master_of(slot);
        let to = self.other_master(from);
        let _: redis::Value = redis::cmd("CLUSTER")
            .arg("MIGRATESLOTS")
            .arg("SLOTSRANGE")
            .arg(slot)
            .arg(slot)
            .arg("NODE")
            .arg(Self::node_id(to))
            .query(&mut from.conn())
            .unwrap_or_else(|e| panic!("CLUSTER MIGRATESLOTS of slot {slot}: {e}"));
        to.port
    }

    /// Moves `slot` (and its keys) from its master to another master, the way
    /// `redis-cli --cluster reshard` does: SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE.
    pub fn move_slot(&self, slot: u16) -> u16 {
        let from = self.master_of(slot);
        let to = self.other_master(from);
        let (from_id, to_id) = (Self::node_id(from), Self::node_id(to));
        let mut fc = from.conn();
        let mut tc = to.conn();
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("IMPORTING")
            .arg(&from_id)
            .query(&mut tc)
            .unwrap();
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("MIGRATING")
            .arg(&to_id)
            .query(&mut fc)
            .unwrap();
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut fc)
                .unwrap();
            if keys.is_empty() {
                break;
            }
            let _: () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to.port)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut fc)
                .unwrap();
        }
        for n in &self.nodes {
            let mut c = n.conn();
            let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&to_id)
                .query(&mut c);
        }
        to.port
    }
}

/// A master, one replica, and 3 sentinels watching them as `mymaster`.
pub struct TestSentinel {
    pub master: Node,
    pub replica: Node,
    pub sentinels: Vec<Node>,
}

pub const MASTER_NAME: &str = "mymaster";

/// Asks the sentinel on `sentinel` for a failover of [`MASTER_NAME`], again while it refuses
/// (its peers do not yet count the replica as good), for up to 30 s; panics if it never accepts.
pub fn ask_failover(sentinel: &mut redis::Connection) {
    let asked = wait_until(Duration::from_secs(30), || {
        redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(MASTER_NAME)
            .query::<()>(sentinel)
            .is_ok()
    });
    assert!(asked, "SENTINEL FAILOVER accepted");
}

impl TestSentinel {
    pub fn start() -> TestSentinel {
        TestSentinel::start_with_args(|_| (0, Vec::new()))
    }

    /// [`TestSentinel::start`] with `extra(role)` (`"master"`, `"replica"`, `"sentinel"`)
    /// giving each process extra arguments and, when not 0, the port that the replica and the
    /// sentinels must use to reach the master (its TLS port, in `support/tls.rs`).
    pub fn start_with_args(mut extra: impl FnMut(&str) -> (u16, Vec<String>)) -> TestSentinel {
        let data = |more: Vec<String>| {
            let mut args: Vec<String> = ["--save", "", "--appendonly", "no"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend(more);
            Node::spawn(free_port(), args, None)
        };
        let (master_tls, master_args) = extra("master");
        let master = data(master_args);
        let master_port = if master_tls == 0 {
            master.port
        } else {
            master_tls
        };
        let (_, mut replica_args) = extra("replica");
        replica_args.extend([
            "--replicaof".into(),
            "127.0.0.1".into(),
            master_port.to_string(),
        ]);
        let replica = data(replica_args);
        assert!(
            wait_until(Duration::from_secs(20), || {
                replica
                    .info("replication")
                    .contains("master_link_status:up")
            }),
            "replica did not sync"
        );
        let sentinels = (0..3)
            .map(|_| {
                let (_, args) = extra("sentinel");
                let conf = format!(
                    "sentinel monitor {MASTER_NAME} 127.0.0.1 {} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 3000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    master_port
                );
                let args = std::iter::once("--sentinel".to_owned())
                    .chain(args)
                    .collect();
                Node::spawn(free_port(), args, Some(conf))
            })
            .collect();
        TestSentinel {
            master,
            replica,
            sentinels,
        }
    }

    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Node::url).collect()
    }

    /// The port sentinels currently report for the master.
    pub fn master_port(&self) -> Option<u16> {
        let mut c = self.sentinels[0].conn();
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query(&mut c)
            .ok();
        addr.and_then(|(_, p)| p.parse().ok())
    }
}
