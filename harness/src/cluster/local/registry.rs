//! The local image registry real nodes pull the harness images from: the CNCF distribution
//! registry ([`crate::toolchain::Toolchain::registry`]) on `127.0.0.1:<port>`, with TLS from
//! the cluster CA and its storage inside the cluster directory.
//!
//! Start with [`Registry::start`], which writes the config, runs the process and waits until
//! the registry answers; then [`push`] the images from
//! [`crate::toolchain::Toolchain::images`], and give containerd the [`Mirror`] so that every
//! image name (`harness.local/<repo>:<tag>`, and any other host's) resolves to the registry. The process itself is data
//! ([`spec`], [`config_yaml`]) for a caller that runs components with its own backend.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

use super::pki::Pki;
use crate::process::{ComponentSpec, ProcRecord, Process, ProcessError};
use crate::toolchain::oci::{Descriptor, MANIFEST_MEDIA_TYPE};
use crate::toolchain::{BuiltImage, ToolchainError};
use crate::wait::{self, Check};

/// How long one registry request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Errors of the local registry.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The port asked for is taken.
    #[error(
        "bind 127.0.0.1:{port} for the image registry: the port is in use; pick a free port \
         (e.g. with `cluster::local::free_port`) or stop what listens there"
    )]
    PortInUse {
        /// The port.
        port: u16,
    },
    /// A file could not be written or read.
    #[error("access {}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The process could not start.
    #[error("start the image registry")]
    Start(#[source] ProcessError),
    /// The registry did not come up.
    #[error("start the image registry; its log is {}", log.display())]
    NotReady {
        /// Its log.
        log: PathBuf,
        /// Why.
        #[source]
        source: wait::WaitError,
    },
    /// The CA certificate is not usable.
    #[error("trust the cluster CA for the image registry: {detail}")]
    BadCa {
        /// What is wrong.
        detail: String,
    },
    /// The registry could not be reached.
    #[error("connect to the image registry at {addr} for {what}")]
    Connect {
        /// Its address.
        addr: SocketAddr,
        /// The request.
        what: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// An HTTP exchange failed.
    #[error("{what} at the image registry")]
    Http {
        /// The request.
        what: String,
        /// Cause.
        #[source]
        source: hyper::Error,
    },
    /// A request took longer than [`REQUEST_TIMEOUT`].
    #[error("{what} at the image registry: no answer after {REQUEST_TIMEOUT:?}")]
    Timeout {
        /// The request.
        what: String,
    },
    /// The registry answered with an unexpected status.
    #[error("{what} at the image registry: it answered {status}: {body}")]
    Refused {
        /// The request.
        what: String,
        /// The status.
        status: StatusCode,
        /// The start of the answer's body.
        body: String,
    },
    /// Content came back under another digest than the one it was stored as.
    #[error("{what}: expected digest {expected}, got {actual}")]
    DigestMismatch {
        /// What was checked.
        what: String,
        /// The digest it should have.
        expected: String,
        /// The digest it has.
        actual: String,
    },
    /// An image's blob could not be read from the cache.
    #[error("read image {image} from the cache")]
    Image {
        /// The image.
        image: String,
        /// Cause.
        #[source]
        source: ToolchainError,
    },
}

impl RegistryError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where the registry keeps its files (inside the cluster directory, e.g. `<cluster>/registry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryLayout {
    /// The registry's directory.
    pub dir: PathBuf,
}

impl RegistryLayout {
    /// A layout rooted at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
    /// `config.yml`
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.yml")
    }
    /// The storage root (`storage/`).
    pub fn storage(&self) -> PathBuf {
        self.dir.join("storage")
    }
    /// The log file.
    pub fn log(&self) -> PathBuf {
        self.dir.join("registry.log")
    }
}

/// The registry's serving certificate and key (for 127.0.0.1, signed by the cluster CA).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryTls {
    /// Certificate (PEM).
    pub cert: PathBuf,
    /// Key (PEM).
    pub key: PathBuf,
}

impl RegistryTls {
    /// The `registry` serving pair of a cluster's PKI.
    pub fn from_pki(pki: &Pki) -> Self {
        Self {
            cert: pki.path("registry.crt"),
            key: pki.path("registry.key"),
        }
    }
}

/// The URL containerd and the push use: `https://127.0.0.1:<port>`.
pub fn endpoint(port: u16) -> String {
    format!("https://127.0.0.1:{port}")
}

fn quoted(p: &Path) -> String {
    // A JSON string is a YAML double-quoted scalar.
    serde_json::to_string(&p.display().to_string()).expect("a string serializes")
}

/// The registry's configuration: loopback only, TLS, filesystem storage in the layout, no
/// access log, no storage health check.
pub fn config_yaml(layout: &RegistryLayout, port: u16, tls: &RegistryTls) -> String {
    format!(
        "version: 0.1\n\
         log:\n  level: info\n  accesslog:\n    disabled: true\n\
         storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n\
         http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {cert}\n    key: {key}\n",
        storage = quoted(&layout.storage()),
        cert = quoted(&tls.cert),
        key = quoted(&tls.key),
    )
}

/// The registry process: `registry serve <config.yml>`. OpenTelemetry export is off (there is
/// no collector; the default exporter would log a connection error per batch).
pub fn spec(binary: &Path, layout: &RegistryLayout) -> ComponentSpec {
    ComponentSpec {
        name: "registry".into(),
        binary: binary.to_path_buf(),
        args: vec!["serve".into(), layout.config().display().to_string()],
        env: vec![("OTEL_TRACES_EXPORTER".into(), "none".into())],
        clear_env: false,
        dir: None,
    }
}

/// Where a real node's containerd pulls from: the registry on `127.0.0.1:<port>`, trusted with
/// the cluster CA at `ca`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// The registry's port.
    pub port: u16,
    /// The CA file that signed the registry's certificate.
    pub ca: PathBuf,
}

impl Mirror {
    /// The CRI plugin's registry section: the registry is the mirror of every host (`*`,
    /// which containerd's CRI plugin takes for any host without a mirror of its own), so
    /// `harness.local/busybox:v1` and `busybox:1.32` alike are pulled from it, by their path
    /// (`busybox`, `library/busybox`); and its TLS is checked against the cluster CA.
    pub fn cri_registry_toml(&self) -> String {
        let cri = "plugins.\"io.containerd.grpc.v1.cri\".registry";
        let url = endpoint(self.port);
        let ca =
            serde_json::to_string(&self.ca.display().to_string()).expect("a string serializes");
        let port = self.port;
        [
            format!("  [{cri}]"),
            format!("    [{cri}.mirrors.\"*\"]"),
            format!("      endpoint = [\"{url}\"]"),
            format!("    [{cri}.configs.\"127.0.0.1:{port}\".tls]"),
            format!("      ca_file = {ca}"),
        ]
        .map(|l| l + "\n")
        .concat()
    }
}

/// An answer of the registry.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn expect(self, what: &str, status: StatusCode) -> Result<Self, RegistryError> {
        if self.status == status {
            return Ok(self);
        }
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(500)]).to_string();
        Err(RegistryError::Refused {
            what: what.to_string(),
            status: self.status,
            body,
        })
    }
}

/// A client of the registry API over TLS trusting one CA. Each request uses a fresh loopback
/// connection.
#[derive(Clone)]
pub struct RegistryClient {
    addr: SocketAddr,
    /// `None`: plain HTTP ([`RegistryClient::plain`]).
    tls: Option<tokio_rustls::TlsConnector>,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RegistryClient {
    /// A client of the registry on `127.0.0.1:port` trusting `ca_pem` (and nothing else).
    pub fn new(port: u16, ca_pem: &str) -> Result<Self, RegistryError> {
        let bad = |detail: String| RegistryError::BadCa { detail };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| bad(format!("unreadable PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| bad(format!("not a CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(bad("the PEM holds no certificate".into()));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            tls: Some(tokio_rustls::TlsConnector::from(Arc::new(config))),
        })
    }

    /// A client of a registry serving plain HTTP at `addr`: one inside a kind node, on the
    /// private Docker network of the cluster's nodes (no host port).
    pub fn plain(addr: SocketAddr) -> Self {
        Self { addr, tls: None }
    }

    /// Sends one request (`path` with its query) and reads the whole answer.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Reply, RegistryError> {
        let what = format!("{method} {path}");
        tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(method, path, headers, body))
            .await
            .map_err(|_| RegistryError::Timeout { what: what.clone() })?
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Reply, RegistryError> {
        let what = format!("{method} {path}");
        let connect = |source| RegistryError::Connect {
            addr: self.addr,
            what: what.clone(),
            source,
        };
        let http = |source| RegistryError::Http {
            what: what.clone(),
            source,
        };
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(connect)?;
        type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;
        let (mut sender, driver): (Sender, tokio::task::JoinHandle<_>) = match &self.tls {
            Some(tls) => {
                let stream = tls
                    .connect(ServerName::IpAddress(self.addr.ip().into()), tcp)
                    .await
                    .map_err(connect)?;
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(http)?;
                (sender, tokio::spawn(conn))
            }
            None => {
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                    .await
                    .map_err(http)?;
                (sender, tokio::spawn(conn))
            }
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.addr.to_string())
            .header(header::CONTENT_LENGTH, body.len());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(body)).expect("a valid request");
        let reply = async {
            let resp = sender.send_request(req).await?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok(Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        }
        .await
        .map_err(http);
        drop(sender);
        driver.abort();
        reply
    }

    /// `GET /v2/`: whether the registry answers (200).
    pub async fn ping(&self) -> Result<(), RegistryError> {
        self.request(Method::GET, "/v2/", &[], Bytes::new())
            .await?
            .expect("GET /v2/", StatusCode::OK)
            .map(|_| ())
    }

    /// The OCI manifest of `repo:tag` and the digest the registry gives it.
    pub async fn manifest(&self, repo: &str, tag: &str) -> Result<(String, Bytes), RegistryError> {
        let path = format!("/v2/{repo}/manifests/{tag}");
        let reply = self
            .request(
                Method::GET,
                &path,
                &[("accept", MANIFEST_MEDIA_TYPE)],
                Bytes::new(),
            )
            .await?
            .expect(&format!("GET {path}"), StatusCode::OK)?;
        let digest = reply
            .header("docker-content-digest")
            .unwrap_or_default()
            .to_string();
        Ok((digest, reply.body))
    }

    /// A blob of `repo`, checked against its digest.
    pub async fn blob(&self, repo: &str, digest: &str) -> Result<Bytes, RegistryError> {
        let path = format!("/v2/{repo}/blobs/{digest}");
        let reply = self
            .request(Method::GET, &path, &[], Bytes::new())
            .await?
            .expect(&format!("GET {path}"), StatusCode::OK)?;
        let actual = crate::toolchain::oci::sha256(&reply.body);
        if actual != digest {
            return Err(RegistryError::DigestMismatch {
                what: format!("GET {path}"),
                expected: digest.to_string(),
                actual,
            });
        }
        Ok(reply.body)
    }

    /// Uploads one blob unless the registry has it: `POST` an upload, then `PUT` the whole
    /// blob with its digest.
    async fn upload_blob(
        &self,
        repo: &str,
        blob: &Descriptor,
        bytes: Bytes,
    ) -> Result<(), RegistryError> {
        let head = format!("/v2/{repo}/blobs/{}", blob.digest);
        if self
            .request(Method::HEAD, &head, &[], Bytes::new())
            .await?
            .status
            == StatusCode::OK
        {
            return Ok(());
        }
        let post = format!("/v2/{repo}/blobs/uploads/");
        let started = self
            .request(Method::POST, &post, &[], Bytes::new())
            .await?
            .expect(&format!("POST {post}"), StatusCode::ACCEPTED)?;
        let location = started.header("location").unwrap_or_default();
        let location = upload_path(location).ok_or_else(|| RegistryError::Refused {
            what: format!("POST {post}"),
            status: started.status,
            body: format!("no usable Location header ({location:?})"),
        })?;
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{sep}digest={}", blob.digest);
        let done = self
            .request(
                Method::PUT,
                &put,
                &[("content-type", "application/octet-stream")],
                bytes,
            )
            .await?
            .expect(
                &format!("PUT blob {} of {repo}", blob.digest),
                StatusCode::CREATED,
            )?;
        match done.header("docker-content-digest") {
            Some(d) if d != blob.digest => Err(RegistryError::DigestMismatch {
                what: format!("upload of a blob of {repo}"),
                expected: blob.digest.clone(),
                actual: d.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// Pushes one image as `<repo>:<tag>`: its blobs, then its manifest by tag.
    pub async fn push_image(&self, image: &BuiltImage) -> Result<(), RegistryError> {
        let repo = &image.name.repo;
        let read = |digest: &str| {
            image
                .read_blob(digest)
                .map(Bytes::from)
                .map_err(|source| RegistryError::Image {
                    image: image.name.to_string(),
                    source,
                })
        };
        for blob in image.blobs() {
            self.upload_blob(repo, blob, read(&blob.digest)?).await?;
        }
        let path = format!("/v2/{repo}/manifests/{}", image.name.tag);
        let done = self
            .request(
                Method::PUT,
                &path,
                &[("content-type", MANIFEST_MEDIA_TYPE)],
                read(image.digest())?,
            )
            .await?
            .expect(&format!("PUT {path}"), StatusCode::CREATED)?;
        match done.header("docker-content-digest") {
            Some(d) if d != image.digest() => Err(RegistryError::DigestMismatch {
                what: format!("push of {}", image.name),
                expected: image.digest().to_string(),
                actual: d.to_string(),
            }),
            _ => Ok(()),
        }
    }
}

/// The path and query of an upload `Location` (absolute URL or absolute path).
fn upload_path(location: &str) -> Option<String> {
    if location.starts_with('/') {
        return Some(location.to_string());
    }
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))?;
    rest.find('/').map(|i| rest[i..].to_string())
}

/// Pushes every image to the registry on `127.0.0.1:port` (trusting `ca_pem`) under its
/// `<repo>:<tag>`; blobs the registry already has are not sent again.
pub async fn push(images: &[BuiltImage], port: u16, ca_pem: &str) -> Result<(), RegistryError> {
    push_with(&RegistryClient::new(port, ca_pem)?, images).await
}

/// Pushes `images` with `client` (by repository path and tag).
pub async fn push_with(
    client: &RegistryClient,
    images: &[BuiltImage],
) -> Result<(), RegistryError> {
    for image in images {
        client.push_image(image).await?;
    }
    Ok(())
}

/// A running registry; stopped when dropped (also while a panic unwinds). Its directory is
/// left to its owner (the cluster directory is removed with the cluster).
#[derive(Debug)]
pub struct Registry {
    process: Process,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its files.
    pub layout: RegistryLayout,
}

impl Registry {
    /// Writes the config into `layout`, starts `binary` on `127.0.0.1:port` and waits up to
    /// `timeout` until it answers over TLS trusting `ca_pem`.
    pub async fn start(
        binary: &Path,
        layout: RegistryLayout,
        port: u16,
        tls: &RegistryTls,
        ca_pem: &str,
        timeout: Duration,
    ) -> Result<Self, RegistryError> {
        let client = RegistryClient::new(port, ca_pem)?;
        for p in [&tls.cert, &tls.key] {
            if !p.is_file() {
                return Err(RegistryError::io(
                    p,
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "the registry's serving certificate is missing (it is made with the \
                         cluster's PKI)",
                    ),
                ));
            }
        }
        std::fs::create_dir_all(layout.storage())
            .map_err(|e| RegistryError::io(&layout.storage(), e))?;
        std::fs::write(layout.config(), config_yaml(&layout, port, tls))
            .map_err(|e| RegistryError::io(&layout.config(), e))?;
        if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
            return Err(match e.kind() {
                std::io::ErrorKind::AddrInUse => RegistryError::PortInUse { port },
                _ => RegistryError::io(Path::new(&format!("127.0.0.1:{port}")), e),
            });
        }
        let process =
            Process::spawn(&spec(binary, &layout), &layout.log()).map_err(RegistryError::Start)?;
        let mut registry = Self {
            process,
            port,
            layout,
        };
        let waited = {
            let process = &mut registry.process;
            wait::poll(
                "the image registry to answer GET /v2/",
                timeout,
                Duration::from_millis(100),
                || {
                    let exited = process.exited();
                    let tail = process.log_tail(20);
                    let client = client.clone();
                    async move {
                        if let Some(status) = exited {
                            return Check::Failed(format!("it exited ({status}):\n{tail}"));
                        }
                        Check::from_result(client.ping().await.map_err(|e| error_chain(&e)))
                    }
                },
            )
            .await
        };
        match waited {
            Ok(()) => Ok(registry),
            Err(source) => Err(RegistryError::NotReady {
                log: registry.layout.log(),
                source,
            }),
        }
    }

    /// The process's identity.
    pub fn record(&self) -> &ProcRecord {
        self.process.record()
    }

    /// Ends the process (TERM, then KILL after five seconds).
    pub fn stop(&mut self) {
        self.process.stop(Duration::from_secs(5));
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_is_mirrored_to_the_registry_with_the_ca() {
        let m = Mirror {
            port: 5443,
            ca: "/c/pki/ca.crt".into(),
        };
        assert_eq!(
            m.cri_registry_toml(),
            "  [plugins.\"io.containerd.grpc.v1.cri\".registry]\n    \
             [plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"*\"]\n      \
             endpoint = [\"https://127.0.0.1:5443\"]\n    \
             [plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"127.0.0.1:5443\".tls]\n      \
             ca_file = \"/c/pki/ca.crt\"\n"
        );
    }

    #[test]
    fn the_config_binds_loopback_with_tls_and_stores_in_the_layout() {
        let layout = RegistryLayout::new("/c/registry");
        let tls = RegistryTls {
            cert: "/c/pki/registry.crt".into(),
            key: "/c/pki/registry.key".into(),
        };
        let yaml = config_yaml(&layout, 5443, &tls);
        assert!(yaml.contains("  addr: 127.0.0.1:5443\n"), "{yaml}");
        assert!(
            yaml.contains("    rootdirectory: \"/c/registry/storage\"\n"),
            "{yaml}"
        );
        assert!(
            yaml.contains("    certificate: \"/c/pki/registry.crt\"\n"),
            "{yaml}"
        );
        assert!(
            yaml.contains("    key: \"/c/pki/registry.key\"\n"),
            "{yaml}"
        );
        let parsed: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(parsed["http"]["tls"]["key"], "/c/pki/registry.key");
        let s = spec(Path::new("/bin/registry"), &layout);
        assert_eq!(s.args, ["serve", "/c/registry/config.yml"]);
    }

    #[test]
    fn upload_locations_become_paths() {
        assert_eq!(
            upload_path("https://127.0.0.1:5443/v2/x/blobs/uploads/u?_state=s").as_deref(),
            Some("/v2/x/blobs/uploads/u?_state=s")
        );
        assert_eq!(
            upload_path("/v2/x/blobs/uploads/u").as_deref(),
            Some("/v2/x/blobs/uploads/u")
        );
        assert_eq!(upload_path("nonsense"), None);
    }

    #[test]
    fn a_ca_that_is_not_pem_is_refused() {
        let e = RegistryClient::new(1, "not a certificate").unwrap_err();
        assert!(e.to_string().contains("no certificate"), "{e}");
    }

    #[tokio::test]
    async fn a_port_in_use_is_named() {
        let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(&tmp.path().join("pki")).unwrap();
        let e = Registry::start(
            Path::new("/nonexistent/registry"),
            RegistryLayout::new(tmp.path().join("registry")),
            port,
            &RegistryTls::from_pki(&pki),
            &pki.ca_pem().unwrap(),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, RegistryError::PortInUse { .. }), "{e:?}");
        assert!(e.to_string().contains(&port.to_string()), "{e}");
    }
}
