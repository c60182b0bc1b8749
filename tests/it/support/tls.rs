//! TLS set-ups for the TLS tests: a throwaway CA with server and client certificates made at run
//! time with `rcgen`, and real redis-server processes with `--tls-port` (standalone, cluster
//! with `tls-cluster yes`, sentinel with `tls-replication yes`). Each server keeps its plain
//! port too (the harness's readiness probe and raw inspection use it); the clients under test
//! only ever get the TLS port.
//!
//! A server binary without TLS (the Valkey wheel: "Failed finding TLS support") is detected by
//! [`tls_support`]; the TLS tests then say so and pass without running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use redisson_lock::{Config, Tls};

use super::cluster::{Node, TestCluster, TestSentinel, MASTER_NAME};
use super::{free_port, redis_server_bin, TestServer};

/// Whether the server binary under test was built with TLS. `None`: it was (run the test);
/// `Some(reason)`: it was not, and the test should print the reason and return.
pub fn tls_support() -> Option<String> {
    static SUPPORT: OnceLock<Option<String>> = OnceLock::new();
    SUPPORT
        .get_or_init(|| {
            // Bad certificate paths make a TLS build exit at once with "Failed to configure
            // TLS"; a build without TLS exits with "Failed finding TLS support".
            let out = Command::new(redis_server_bin())
                .args(["--port", "0", "--save", ""])
                .args(["--tls-port", &free_port().to_string()])
                .args([
                    "--tls-cert-file",
                    "/nonexistent",
                    "--tls-key-file",
                    "/nonexistent",
                ])
                .stdin(Stdio::null())
                .output()
                .expect("run the server binary");
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            text.contains("TLS support").then(|| {
                format!(
                    "skipped: {} has no TLS support (TLS tests run on Redis)",
                    redis_server_bin()
                )
            })
        })
        .clone()
}

/// Skips the calling test (with a plain message) when the server has no TLS.
#[macro_export]
macro_rules! require_tls {
    () => {
        if let Some(reason) = $crate::support::tls::tls_support() {
            eprintln!("{reason}");
            return;
        }
    };
}

/// A certificate and its key, as PEM and as files.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A throwaway CA with a server certificate (`localhost`, `127.0.0.1`) and a client certificate.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca_pem: String,
    pub ca: PathBuf,
    ca_cert: rcgen::Certificate,
    ca_key: KeyPair,
    pub server: Issued,
    pub client: Issued,
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A self-signed CA certificate and its key.
pub fn make_ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap(), key)
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let (ca_cert, ca_key) = make_ca("redisson-lock test CA");
        let ca_pem = ca_cert.pem();
        let ca = write(dir.path(), "ca.pem", &ca_pem);
        let mut pki = Pki {
            dir,
            ca_pem,
            ca,
            ca_cert,
            ca_key,
            server: Issued {
                cert_pem: String::new(),
                key_pem: String::new(),
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            client: Issued {
                cert_pem: String::new(),
                key_pem: String::new(),
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
        };
        pki.server = pki.issue("server", &["localhost", "127.0.0.1"], false);
        pki.client = pki.issue("client", &["redisson-lock-client"], false);
        pki
    }

    /// A certificate for `names` signed by this CA; `expired`: valid only in 2020.
    pub fn issue(&self, file: &str, names: &[&str], expired: bool) -> Issued {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, file);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca_cert, &self.ca_key).unwrap();
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        Issued {
            cert: write(self.dir.path(), &format!("{file}.pem"), &cert_pem),
            key: write(self.dir.path(), &format!("{file}-key.pem"), &key_pem),
            cert_pem,
            key_pem,
        }
    }

    /// redis-server arguments serving TLS on `tls_port` with `cert`; clients must present a
    /// certificate of this CA when `mutual`.
    pub fn server_args(&self, tls_port: u16, cert: &Issued, mutual: bool) -> Vec<String> {
        let p = |p: &Path| p.display().to_string();
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            p(&cert.cert),
            "--tls-key-file".into(),
            p(&cert.key),
            "--tls-ca-cert-file".into(),
            p(&self.ca),
            "--tls-auth-clients".into(),
            if mutual { "yes" } else { "no" }.into(),
        ]
    }

    /// The client-side settings: this CA, and the client certificate.
    pub fn client_tls(&self) -> Tls {
        Tls::new()
            .with_ca_file(&self.ca)
            .with_client_cert_files(&self.client.cert, &self.client.key)
    }
}

/// A standalone redis-server with TLS on `tls_port` (its plain port stays for inspection).
pub struct TlsServer {
    pub plain: TestServer,
    pub tls_port: u16,
}

impl TlsServer {
    /// TLS with the PKI's server certificate; mutual TLS when `mutual`.
    pub fn start(pki: &Pki, mutual: bool) -> TlsServer {
        TlsServer::start_cert(pki, &pki.server, mutual)
    }

    /// TLS with `cert` as the server certificate (an expired one, one for another name).
    pub fn start_cert(pki: &Pki, cert: &Issued, mutual: bool) -> TlsServer {
        let tls_port = free_port();
        let args = pki.server_args(tls_port, cert, mutual);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let plain = TestServer::start_with(&args);
        assert!(
            super::cluster::wait_until(Duration::from_secs(10), || {
                std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_ok()
            }),
            "TLS port {tls_port} did not open"
        );
        TlsServer { plain, tls_port }
    }

    /// `rediss://127.0.0.1:<tls port>/`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_port)
    }

    /// A client configuration for the TLS port with the PKI's CA and client certificate.
    pub fn config(&self, pki: &Pki) -> Config {
        Config::new(self.url()).with_tls(pki.client_tls())
    }
}

/// A 3-master cluster speaking TLS to clients and on its bus (`tls-cluster yes`), mutual TLS.
pub fn tls_cluster(pki: &Pki) -> (TestCluster, Vec<String>) {
    let mut tls_ports = Vec::new();
    let cluster = TestCluster::start_with_args(0, |_| {
        let port = free_port();
        tls_ports.push(port);
        let mut args = pki.server_args(port, &pki.server, true);
        args.extend(["--tls-cluster".into(), "yes".into()]);
        args
    });
    let urls = tls_ports
        .iter()
        .map(|p| format!("rediss://127.0.0.1:{p}/"))
        .collect();
    (cluster, urls)
}

/// A master, a replica (`tls-replication yes`) and 3 sentinels, all over mutual TLS: the
/// sentinels monitor the master's TLS port, and the clients reach the sentinels on theirs.
pub fn tls_sentinel(pki: &Pki) -> (TestSentinel, Vec<String>) {
    let mut sentinel_ports = Vec::new();
    let set = TestSentinel::start_with_args(|role| {
        let port = free_port();
        let mut args = pki.server_args(port, &pki.server, true);
        args.extend(["--tls-replication".into(), "yes".into()]);
        if role == "sentinel" {
            sentinel_ports.push(port);
        }
        (port, args)
    });
    let urls = sentinel_ports
        .iter()
        .map(|p| format!("rediss://127.0.0.1:{p}/"))
        .collect();
    (set, urls)
}

/// The master name the sentinels watch.
pub const MASTER: &str = MASTER_NAME;

/// Unused-import guard for `Node` (kept for callers inspecting nodes).
pub fn node_port(node: &Node) -> u16 {
    node.port
}
