//! A proxy between a client (the controller's manager) and the apiserver that can make the
//! client's view stale on purpose: hold a resource's watch events back, drop them, or end its
//! watches. Start with [`ProxyHandle`], made by [`start_local`] for a local cluster (or
//! [`start`] for any apiserver the harness holds the CA of).
//!
//! # What it does
//!
//! It listens on `127.0.0.1:<ephemeral port>` with TLS (a serving certificate for 127.0.0.1
//! issued by the cluster CA, so a kubeconfig naming [`ProxyHandle::url`] and the cluster CA
//! works unchanged) and forwards every request to the apiserver over TLS, trusting the cluster
//! CA only. Requests and answers pass unchanged but for hop-by-hop headers; in particular the
//! client's `Authorization` header goes through as it came, so the client keeps exactly its own
//! identity and RBAC (the proxy has no credentials of its own). TLS ends at the proxy: a
//! client certificate does not reach the apiserver, so clients authenticate with a bearer
//! token (the OpenKruise manager's kubeconfig holds its ServiceAccount's). ALPN offers
//! `http/1.1` only: clients (client-go, kube-rs) speak HTTP/1.1 to it, one connection per open
//! watch. Protocol upgrades (exec, attach, port-forward) are answered 501.
//!
//! A request is a watch when its query has `watch=true` (or `1`, `t`, ... as Go reads a
//! boolean) or its path has the `/watch/` segment; its resource is the plural name in the path
//! (`pods`, `configmaps`, `clonesets`), in any API group and namespace. A watch answered 200 is
//! cut into events by its content type:
//! - `application/json`: one JSON value per event (the apiserver writes one a line; the line's
//!   newline goes with its event);
//! - `application/vnd.kubernetes.protobuf;stream=watch`: frames of a 4-byte big-endian length
//!   and that many bytes;
//! - anything else (or a `Content-Encoding`): no events, the bytes are forwarded as they come,
//!   each chunk standing for an event (see [`ProxyHandle::drop_events`] for what that changes).
//!
//! A partial event is kept until the rest of it arrives, so the client only ever gets whole
//! events, and a watch the proxy ends ends between two events.
//!
//! # Commands
//!
//! Each command names a resource and applies at once to its open watches and to those opened
//! later; a command for another resource leaves them alone.
//! - [`ProxyHandle::hold`]`(resource, d)`: for `d` from now, the events of its watches are
//!   buffered instead of delivered; when the hold ends (or [`ProxyHandle::release`]) they are
//!   delivered in the order they arrived, before any later event. A new hold replaces the
//!   previous one's end.
//! - [`ProxyHandle::drop_events`]`(resource, d)`: for `d` from now, the events that arrive on
//!   its watches are discarded (ERROR events excepted, which end a watch anyway); the watches
//!   stay open, so the client's view stays stale. The client's resource version stays at the
//!   last event it got, so its next watch (after [`ProxyHandle::close_watches`], or its own
//!   end) replays what was dropped, or it re-lists. Events held before the window are still
//!   delivered. On a stream with no events (an unknown framing), the first chunk arriving in
//!   the window ends the watch instead (counted in [`WatchStats::closed`]).
//! - [`ProxyHandle::release`]`(resource)`: ends its hold and drop windows now.
//! - [`ProxyHandle::close_watches`]`(resource)`: ends its open watch answers (cleanly, between
//!   two events; held events are discarded with them); the client watches again (client-go's
//!   reflector resumes from its last resource version, kube-rs's watcher too) or re-lists.
//!   Watches opened afterwards are not affected.
//!
//! [`ProxyHandle::stats`] counts, per resource, watches opened and closed, and events
//! forwarded, held and dropped ([`WatchStats`]).
//!
//! # Lifetime
//!
//! The handle owns the proxy: dropping it (or [`ProxyHandle::stop`], which also waits) ends
//! the listener, every connection and every forwarded watch; [`ProxyHandle::finished`] says
//! when the last of its tasks is gone. Nothing of it outlives the handle, so a client routed
//! through it loses the apiserver when the handle goes (a local cluster left running after the
//! harness exits keeps its processes, not the proxy).
//!
//! ```no_run
//! # async fn f(cluster: &harness::cluster::local::LocalCluster) -> anyhow::Result<()> {
//! use std::time::Duration;
//! let proxy = harness::cluster::proxy::start_local(cluster).await?;
//! // ... a client whose kubeconfig names proxy.url() and carries a token ...
//! proxy.hold("configmaps", Duration::from_secs(30));
//! // ... the client's configmap watches see nothing new ...
//! proxy.release("configmaps"); // ... and now everything, in order
//! println!("{:?}", proxy.stats("configmaps"));
//! proxy.stop().await;
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, Response, StatusCode, Uri, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::local::pki::Pki;
use super::local::{LocalCluster, LocalError};

/// The common name of the proxy's serving certificate.
pub const CERT_NAME: &str = "apiserver-proxy";

/// Errors of starting the proxy (forwarding errors are answered to the client as a 502
/// `Status`, and logged).
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The apiserver URL is not `https://<ip>:<port>`.
    #[error("read the apiserver address `{server}`: expected https://<ip>:<port>")]
    Upstream {
        /// The URL given.
        server: String,
    },
    /// A certificate or key is not usable.
    #[error("set up the proxy's TLS: {detail}")]
    Tls {
        /// What is wrong.
        detail: String,
    },
    /// The serving certificate could not be issued from the cluster CA.
    #[error("issue the proxy's serving certificate")]
    Pki(#[source] LocalError),
    /// No port to listen on.
    #[error("listen on 127.0.0.1 for the proxy")]
    Bind(#[source] std::io::Error),
}

/// What [`start`] needs.
#[derive(Clone)]
pub struct ProxyConfig {
    /// The apiserver: `https://<ip>:<port>`.
    pub server: String,
    /// The CA that signed the apiserver's certificate (PEM), the only one trusted upstream.
    pub ca_pem: String,
    /// The proxy's serving certificate for 127.0.0.1 (PEM).
    pub cert_pem: String,
    /// Its key (PEM).
    pub key_pem: String,
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// What happened on one resource's watches since the proxy started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WatchStats {
    /// Watch answers started (status 200).
    pub opened: u64,
    /// Watch answers streaming now.
    pub open: u64,
    /// Events delivered to the client (held ones included, once delivered).
    pub forwarded: u64,
    /// Events buffered by a hold.
    pub held: u64,
    /// Events discarded by a drop window.
    pub dropped: u64,
    /// Watch answers the proxy ended ([`ProxyHandle::close_watches`], or a drop window on a
    /// stream with no events).
    pub closed: u64,
    /// Watches framed as JSON.
    pub json: u64,
    /// Watches framed as Kubernetes protobuf.
    pub protobuf: u64,
    /// Watches of another content type, forwarded byte for byte.
    pub raw: u64,
}

/// A running proxy; dropping it stops it. See the [module documentation](self).
pub struct ProxyHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
    ended: watch::Receiver<()>,
    // Dropped with the handle: every task of the proxy sees the channel close and ends.
    _shutdown: watch::Sender<()>,
}

impl std::fmt::Debug for ProxyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyHandle")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream)
            .finish_non_exhaustive()
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Resolves once every task of a proxy has ended (its handle dropped or stopped): listener
/// closed, connections and watches gone.
#[derive(Debug, Clone)]
pub struct Finished(watch::Receiver<()>);

impl Finished {
    /// Waits until every task of the proxy has ended.
    pub async fn wait(mut self) {
        while self.0.changed().await.is_ok() {}
    }

    /// Whether every task of the proxy has ended.
    pub fn is_finished(&self) -> bool {
        self.0.has_changed().is_err()
    }
}

impl ProxyHandle {
    /// Where it listens (`127.0.0.1:<port>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its URL, for a kubeconfig's `server`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Holds the events of `resource`'s watches (open and new) for `duration` from now; they
    /// are delivered in order when the hold ends or on [`ProxyHandle::release`]. Replaces the
    /// end of an earlier hold.
    pub fn hold(&self, resource: &str, duration: Duration) {
        let until = Instant::now() + duration;
        self.shared
            .command(resource, |r| r.hold_until = Some(until));
    }

    /// Discards the events that arrive on `resource`'s watches (open and new) for `duration`
    /// from now, ERROR events excepted; the watches stay open. On a stream with no events (an
    /// unknown framing), ends the watch instead. Replaces the end of an earlier window.
    pub fn drop_events(&self, resource: &str, duration: Duration) {
        let until = Instant::now() + duration;
        self.shared
            .command(resource, |r| r.drop_until = Some(until));
    }

    /// Ends `resource`'s hold and drop windows now: held events are delivered, in order.
    pub fn release(&self, resource: &str) {
        self.shared.command(resource, |r| {
            r.hold_until = None;
            r.drop_until = None;
        });
    }

    /// Ends the watch answers of `resource` open now (cleanly, between two events; what they
    /// held is discarded); later watches are not affected.
    pub fn close_watches(&self, resource: &str) {
        self.shared.command(resource, |r| r.closes += 1);
    }

    /// What happened on `resource`'s watches so far.
    pub fn stats(&self, resource: &str) -> WatchStats {
        self.shared
            .stats
            .lock()
            .expect("not poisoned")
            .get(resource)
            .copied()
            .unwrap_or_default()
    }

    /// [`ProxyHandle::stats`] of every resource watched so far, by resource.
    pub fn all_stats(&self) -> BTreeMap<String, WatchStats> {
        self.shared.stats.lock().expect("not poisoned").clone()
    }

    /// Waits up to `timeout` for the client's next write the apiserver accepts (a create,
    /// update, patch or delete; not its leader-election leases nor its events): what it was
    /// (`PATCH /api/v1/namespaces/x/pods/p`), or `None` when none came in time.
    pub async fn next_write(&self, timeout: Duration) -> Option<String> {
        let mut rx = self.shared.writes.subscribe();
        rx.borrow_and_update();
        match tokio::time::timeout(timeout, rx.changed()).await {
            Ok(Ok(())) => Some(rx.borrow().1.clone()),
            _ => None,
        }
    }

    /// Resolves when every task of the proxy has ended (after the handle is dropped).
    pub fn finished(&self) -> Finished {
        Finished(self.ended.clone())
    }

    /// Stops the proxy and waits until its listener, connections and watches are gone.
    pub async fn stop(self) {
        let finished = self.finished();
        drop(self);
        finished.wait().await;
    }
}

/// A proxy in front of the apiserver of `cluster`, serving with a certificate issued by its CA.
pub async fn start_local(cluster: &LocalCluster) -> Result<ProxyHandle, ProxyError> {
    let pki = Pki::at(&cluster.layout().pki());
    let (cert_pem, key_pem) = pki.issue_serving(CERT_NAME).map_err(ProxyError::Pki)?;
    start(ProxyConfig {
        server: cluster.server().to_string(),
        ca_pem: pki.ca_pem().map_err(ProxyError::Pki)?,
        cert_pem,
        key_pem,
    })
    .await
}

/// Starts a proxy as `config` says, listening on an ephemeral port of 127.0.0.1.
pub async fn start(config: ProxyConfig) -> Result<ProxyHandle, ProxyError> {
    let upstream = upstream_addr(&config.server)?;
    let connector = client_tls(&config.ca_pem)?;
    let acceptor = server_tls(&config.cert_pem, &config.key_pem)?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(ProxyError::Bind)?;
    let addr = listener.local_addr().map_err(ProxyError::Bind)?;
    let (shutdown_tx, shutdown) = watch::channel(());
    let (ended_tx, ended) = watch::channel(());
    let shared = Arc::new(Shared {
        upstream,
        connector,
        rules: Mutex::default(),
        stats: Mutex::default(),
        changed: watch::channel(0).0,
        writes: watch::channel((0, String::new())).0,
        _ended: ended_tx,
    });
    let server = tokio::spawn(serve(listener, acceptor, shared.clone(), shutdown));
    tracing::debug!(%addr, %upstream, "apiserver proxy listening");
    Ok(ProxyHandle {
        addr,
        shared,
        server,
        ended,
        _shutdown: shutdown_tx,
    })
}

/// The state every task of one proxy shares; it goes when the last task does.
struct Shared {
    upstream: SocketAddr,
    connector: TlsConnector,
    rules: Mutex<BTreeMap<String, Rules>>,
    stats: Mutex<BTreeMap<String, WatchStats>>,
    /// Bumped by every command, so that watches look at their rules again.
    changed: watch::Sender<u64>,
    /// The client's writes the apiserver accepted so far, and the last one ([`is_write`]).
    writes: watch::Sender<(u64, String)>,
    /// Dropped with the last task: what [`Finished`] waits for.
    _ended: watch::Sender<()>,
}

/// The commands in force for one resource.
#[derive(Debug, Clone, Copy, Default)]
struct Rules {
    hold_until: Option<Instant>,
    drop_until: Option<Instant>,
    /// How many times its watches were closed: a watch ends when this moves past the value
    /// it saw when it opened.
    closes: u64,
}

impl Shared {
    fn command(&self, resource: &str, f: impl FnOnce(&mut Rules)) {
        f(self
            .rules
            .lock()
            .expect("not poisoned")
            .entry(resource.to_string())
            .or_default());
        self.changed.send_modify(|n| *n += 1);
    }

    fn rules(&self, resource: &str) -> Rules {
        self.rules
            .lock()
            .expect("not poisoned")
            .get(resource)
            .copied()
            .unwrap_or_default()
    }

    fn count(&self, resource: &str, f: impl FnOnce(&mut WatchStats)) {
        f(self
            .stats
            .lock()
            .expect("not poisoned")
            .entry(resource.to_string())
            .or_default());
    }
}

fn upstream_addr(server: &str) -> Result<SocketAddr, ProxyError> {
    let bad = || ProxyError::Upstream {
        server: server.to_string(),
    };
    let uri: Uri = server.parse().map_err(|_| bad())?;
    if uri.scheme_str() != Some("https") {
        return Err(bad());
    }
    let host = uri.host().ok_or_else(bad)?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, uri.port_u16().unwrap_or(443)))
}

fn tls_error(e: impl std::fmt::Display) -> ProxyError {
    ProxyError::Tls {
        detail: e.to_string(),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_tls(ca_pem: &str) -> Result<TlsConnector, ProxyError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.map_err(tls_error)?).map_err(tls_error)?;
    }
    if roots.is_empty() {
        return Err(tls_error("the CA PEM holds no certificate"));
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

fn server_tls(cert_pem: &str, key_pem: &str) -> Result<TlsAcceptor, ProxyError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(tls_error)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(tls_error)?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(tls_error)?;
    // HTTP/1.1 only: client-go and kube-rs fall back to it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;
/// One client connection's connection to the apiserver, made on its first request and again
/// when the apiserver closed it.
type UpstreamSlot = Arc<tokio::sync::Mutex<Option<SendRequest<Incoming>>>>;

/// Accepts connections until shutdown; the connections are its children (aborted with it).
async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    connections.spawn(connection(
                        tcp,
                        acceptor.clone(),
                        shared.clone(),
                        shutdown.clone(),
                    ));
                }
                Err(e) => tracing::debug!(error = %e, "apiserver proxy: accept failed"),
            },
        }
    }
    drop(listener);
    connections.shutdown().await;
}

async fn connection(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
) {
    let _ = tcp.set_nodelay(true);
    let tls = tokio::select! {
        _ = shutdown.changed() => return,
        tls = acceptor.accept(tcp) => match tls {
            Ok(tls) => tls,
            Err(e) => {
                tracing::debug!(error = %e, "apiserver proxy: TLS handshake failed");
                return;
            }
        },
    };
    let upstream: UpstreamSlot = Arc::default();
    let service = {
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        hyper::service::service_fn(move |req| {
            forward(req, shared.clone(), upstream.clone(), shutdown.clone())
        })
    };
    let served =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        _ = shutdown.changed() => {}
        r = served => if let Err(e) = r {
            tracing::debug!(error = %e, "apiserver proxy: client connection ended");
        },
    }
}

/// Headers that concern one connection, not the request: not forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for h in HOP_BY_HOP {
        headers.remove(*h);
    }
}

/// A Kubernetes `Status` answer of the proxy itself.
fn status(code: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "code": code.as_u16(),
    })
    .to_string();
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(
            Full::new(Bytes::from(body))
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .expect("a valid answer")
}

async fn forward(
    mut req: Request<Incoming>,
    shared: Arc<Shared>,
    upstream: UpstreamSlot,
    shutdown: watch::Receiver<()>,
) -> Result<Response<ProxyBody>, Infallible> {
    if req.headers().contains_key(header::UPGRADE) {
        return Ok(status(
            StatusCode::NOT_IMPLEMENTED,
            "the apiserver proxy does not forward protocol upgrades (exec, attach, port-forward)",
        ));
    }
    let watched = watched_resource(req.uri());
    let what = format!("{} {}", req.method(), req.uri());
    let write =
        is_write(req.method(), req.uri()).then(|| format!("{} {}", req.method(), req.uri().path()));
    strip_hop_by_hop(req.headers_mut());
    let sent = {
        let mut slot = upstream.lock().await;
        match ready_sender(&mut slot, &shared, &shutdown).await {
            Ok(sender) => sender.send_request(req),
            Err(e) => {
                tracing::debug!(error = %e, "apiserver proxy: {what}");
                return Ok(status(
                    StatusCode::BAD_GATEWAY,
                    &format!("the apiserver proxy could not reach the apiserver: {e}"),
                ));
            }
        }
    };
    let answer = match sent.await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::debug!(error = %e, "apiserver proxy: {what}");
            return Ok(status(
                StatusCode::BAD_GATEWAY,
                &format!("the apiserver proxy lost the apiserver: {e}"),
            ));
        }
    };
    let (mut parts, body) = answer.into_parts();
    if let Some(write) = write
        && parts.status.is_success()
    {
        shared.writes.send_modify(|(n, last)| {
            *n += 1;
            *last = write;
        });
    }
    strip_hop_by_hop(&mut parts.headers);
    let body = match watched {
        Some(resource) if parts.status == StatusCode::OK => {
            let framing = Framing::of(&parts.headers);
            parts.headers.remove(header::CONTENT_LENGTH);
            let (tx, rx) = mpsc::channel(64);
            tokio::spawn(pump(resource, framing, body, tx, shared, shutdown));
            ChannelBody(rx).boxed_unsync()
        }
        _ => body.map_err(BoxError::from).boxed_unsync(),
    };
    Ok(Response::from_parts(parts, body))
}

/// The connection in `slot` once it can take a request, or a new one.
async fn ready_sender<'a>(
    slot: &'a mut Option<SendRequest<Incoming>>,
    shared: &Arc<Shared>,
    shutdown: &watch::Receiver<()>,
) -> Result<&'a mut SendRequest<Incoming>, String> {
    let usable = match slot.as_mut() {
        Some(sender) => sender.ready().await.is_ok(),
        None => false,
    };
    if !usable {
        *slot = Some(connect(shared, shutdown.clone()).await?);
    }
    Ok(slot.as_mut().expect("just made"))
}

async fn connect(
    shared: &Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
) -> Result<SendRequest<Incoming>, String> {
    let tcp = TcpStream::connect(shared.upstream)
        .await
        .map_err(|e| format!("connect to {}: {e}", shared.upstream))?;
    let _ = tcp.set_nodelay(true);
    let tls = shared
        .connector
        .connect(ServerName::IpAddress(shared.upstream.ip().into()), tcp)
        .await
        .map_err(|e| format!("TLS with {}: {e}", shared.upstream))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP with {}: {e}", shared.upstream))?;
    let owner = shared.clone();
    tokio::spawn(async move {
        let _owner = owner;
        tokio::select! {
            _ = shutdown.changed() => {}
            r = conn => if let Err(e) = r {
                tracing::debug!(error = %e, "apiserver proxy: apiserver connection ended");
            },
        }
    });
    Ok(sender)
}

/// The answer body of a forwarded watch: what its pump delivers.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// Why a watch's pump stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A command ended it.
    Closed,
    /// The apiserver ended it.
    Upstream,
    /// The client went away.
    ClientGone,
    /// The proxy stopped.
    Shutdown,
}

/// Reads one watch answer from the apiserver, cuts it into events and delivers them to `tx`
/// as the commands in force for `resource` say.
async fn pump(
    resource: String,
    framing: Framing,
    mut body: Incoming,
    tx: mpsc::Sender<Bytes>,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<()>,
) {
    let mut changed = shared.changed.subscribe();
    let mut w = Watch {
        epoch: shared.rules(&resource).closes,
        resource,
        framing,
        held: VecDeque::new(),
        tx,
        shared,
    };
    w.shared.count(&w.resource, |s| {
        s.opened += 1;
        s.open += 1;
        match framing {
            Framing::Json => s.json += 1,
            Framing::Protobuf => s.protobuf += 1,
            Framing::Raw => s.raw += 1,
        }
    });
    let mut splitter = Splitter::new(framing);
    let mut upstream_done = false;
    let end = 'pump: loop {
        let rules = w.shared.rules(&w.resource);
        if rules.closes != w.epoch {
            break End::Closed;
        }
        let hold_until = rules.hold_until.filter(|t| *t > Instant::now());
        if hold_until.is_none() && !w.held.is_empty() {
            match w.deliver(None).await {
                Ok(()) => continue,
                Err(end) => break end,
            }
        }
        if upstream_done && w.held.is_empty() {
            break End::Upstream;
        }
        tokio::select! {
            _ = shutdown.changed() => break End::Shutdown,
            _ = changed.changed() => {}
            () = tokio::time::sleep_until(hold_until.unwrap_or_else(Instant::now)),
                if hold_until.is_some() => {}
            () = w.tx.closed() => break End::ClientGone,
            frame = body.frame(), if !upstream_done => {
                let events = match frame {
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => splitter.push(data),
                        Err(_) => vec![],
                    },
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, resource = w.resource, "apiserver proxy: watch read failed");
                        upstream_done = true;
                        splitter.finish().into_iter().collect()
                    }
                    None => {
                        upstream_done = true;
                        splitter.finish().into_iter().collect()
                    }
                };
                for event in events {
                    if let Err(end) = w.admit(event).await {
                        break 'pump end;
                    }
                }
            }
        }
    };
    w.shared.count(&w.resource, |s| {
        s.open -= 1;
        if end == End::Closed {
            s.closed += 1;
        }
    });
}

/// One forwarded watch.
struct Watch {
    resource: String,
    framing: Framing,
    /// The resource's close count when it opened.
    epoch: u64,
    held: VecDeque<Bytes>,
    tx: mpsc::Sender<Bytes>,
    shared: Arc<Shared>,
}

impl Watch {
    /// Drops, holds or delivers one event that just arrived.
    async fn admit(&mut self, event: Bytes) -> Result<(), End> {
        let rules = self.shared.rules(&self.resource);
        let now = Instant::now();
        if rules.closes != self.epoch {
            return Err(End::Closed);
        }
        if rules.drop_until.is_some_and(|t| t > now)
            && event_type(self.framing, &event).as_deref() != Some("ERROR")
        {
            if self.framing == Framing::Raw {
                return Err(End::Closed);
            }
            self.shared.count(&self.resource, |s| s.dropped += 1);
            return Ok(());
        }
        if rules.hold_until.is_some_and(|t| t > now) {
            self.held.push_back(event);
            self.shared.count(&self.resource, |s| s.held += 1);
            return Ok(());
        }
        self.deliver(Some(event)).await
    }

    /// Delivers what is held, then `event`.
    async fn deliver(&mut self, event: Option<Bytes>) -> Result<(), End> {
        let events: Vec<Bytes> = self.held.drain(..).chain(event).collect();
        for e in events {
            self.tx.send(e).await.map_err(|_| End::ClientGone)?;
            self.shared.count(&self.resource, |s| s.forwarded += 1);
        }
        Ok(())
    }
}

/// Whether a request changes what the apiserver stores, leases (a leader's renewals) and
/// events (what a controller says it did) aside: what a crash "right after a write" follows.
pub fn is_write(method: &http::Method, uri: &Uri) -> bool {
    use http::Method;
    let mutating = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method);
    let bookkeeping = uri
        .path()
        .split('/')
        .any(|segment| segment == "leases" || segment == "events");
    mutating && !bookkeeping
}

/// The plural resource a watch request is for (`pods`, `clonesets`), or `None` when `uri` is
/// not a watch: a `watch` query parameter Go reads as true, or a `/watch/` path segment after
/// the group version.
pub fn watched_resource(uri: &Uri) -> Option<String> {
    let by_query = uri.query().is_some_and(|q| {
        q.split('&').any(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            k == "watch" && matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
        })
    });
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return None,
    };
    let (by_path, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    if !(by_query || by_path) {
        return None;
    }
    let resource = match rest {
        ["namespaces", _, resource, ..] | [resource, ..] => *resource,
        [] => return None,
    };
    (!resource.is_empty()).then(|| resource.to_string())
}

/// How a watch answer is cut into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON value per event (`application/json`).
    Json,
    /// A 4-byte big-endian length, then the event (`application/vnd.kubernetes.protobuf`).
    Protobuf,
    /// Not cut: each chunk as it comes (any other content type, or a content encoding).
    Raw,
}

impl Framing {
    /// The framing of an answer with `headers`.
    pub fn of(headers: &HeaderMap) -> Self {
        let encoded = headers
            .get(header::CONTENT_ENCODING)
            .is_some_and(|e| e.as_bytes() != b"identity");
        let media = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase())
            .unwrap_or_default();
        match media.as_str() {
            _ if encoded => Self::Raw,
            "application/json" => Self::Json,
            "application/vnd.kubernetes.protobuf" => Self::Protobuf,
            _ => Self::Raw,
        }
    }
}

/// Cuts a watch answer, arriving in chunks of any size, into whole events.
#[derive(Debug)]
pub struct Splitter {
    framing: Framing,
    buf: BytesMut,
}

impl Splitter {
    /// A splitter for `framing`.
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            buf: BytesMut::new(),
        }
    }

    /// Takes the next chunk; returns the events it completed, in order (a partial event is
    /// kept until the rest arrives). A JSON stream that is not JSON is forwarded as it comes
    /// from then on.
    pub fn push(&mut self, chunk: Bytes) -> Vec<Bytes> {
        if self.framing == Framing::Raw {
            return (!chunk.is_empty()).then_some(chunk).into_iter().collect();
        }
        self.buf.extend_from_slice(&chunk);
        let mut events = vec![];
        loop {
            match self.next_len() {
                Ok(Some(n)) => events.push(self.buf.split_to(n).freeze()),
                Ok(None) => break,
                Err(()) => {
                    self.framing = Framing::Raw;
                    events.extend(self.finish());
                    break;
                }
            }
        }
        events
    }

    /// The bytes of a partial event kept so far.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// At the end of the stream: what is left (a partial event), if anything.
    pub fn finish(&mut self) -> Option<Bytes> {
        (!self.buf.is_empty()).then(|| self.buf.split().freeze())
    }

    /// The length of the first whole event in the buffer; `Err` if it is not of the framing.
    fn next_len(&self) -> Result<Option<usize>, ()> {
        match self.framing {
            Framing::Raw => Ok(None),
            Framing::Protobuf => {
                let Some(len) = self.buf.first_chunk::<4>() else {
                    return Ok(None);
                };
                let n = 4 + u32::from_be_bytes(*len) as usize;
                Ok((self.buf.len() >= n).then_some(n))
            }
            Framing::Json => {
                let mut values = serde_json::Deserializer::from_slice(&self.buf)
                    .into_iter::<serde::de::IgnoredAny>();
                match values.next() {
                    None => return Ok(None),
                    Some(Err(e)) if e.is_eof() => return Ok(None),
                    Some(Err(_)) => return Err(()),
                    Some(Ok(_)) => {}
                }
                let end = values.byte_offset();
                // The whitespace after the value, through its newline, goes with it.
                for (i, b) in self.buf[end..].iter().enumerate() {
                    match b {
                        b'\n' => return Ok(Some(end + i + 1)),
                        b' ' | b'\t' | b'\r' => {}
                        _ => return Ok(Some(end + i)),
                    }
                }
                Ok(None)
            }
        }
    }
}

/// The `type` of a watch event (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`), when the
/// framing has events and the event can be read.
pub fn event_type(framing: Framing, event: &[u8]) -> Option<String> {
    match framing {
        Framing::Raw => None,
        Framing::Json => {
            #[derive(serde::Deserialize)]
            struct Head {
                #[serde(rename = "type")]
                kind: String,
            }
            serde_json::from_slice::<Head>(event).ok().map(|h| h.kind)
        }
        // A `metav1.WatchEvent` message: field 1 is its type.
        Framing::Protobuf => protobuf_string_field(event.get(4..)?, 1),
    }
}

/// The first string field `number` of a protobuf message.
fn protobuf_string_field(mut msg: &[u8], number: u64) -> Option<String> {
    fn varint(msg: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = msg.split_first()?;
            *msg = rest;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    while !msg.is_empty() {
        let key = varint(&mut msg)?;
        match key & 7 {
            0 => {
                varint(&mut msg)?;
            }
            1 => msg = msg.get(8..)?,
            2 => {
                let n = usize::try_from(varint(&mut msg)?).ok()?;
                let value = msg.get(..n)?;
                if key >> 3 == number {
                    return String::from_utf8(value.to_vec()).ok();
                }
                msg = &msg[n..];
            }
            5 => msg = msg.get(4..)?,
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_every_way(framing: Framing, stream: &[u8]) -> Vec<Vec<Bytes>> {
        // Every split of the stream into two chunks, and one byte at a time.
        let mut ways = vec![];
        for cut in 0..=stream.len() {
            let mut s = Splitter::new(framing);
            let mut events = s.push(Bytes::copy_from_slice(&stream[..cut]));
            events.extend(s.push(Bytes::copy_from_slice(&stream[cut..])));
            assert_eq!(s.pending(), 0, "cut at {cut}");
            ways.push(events);
        }
        let mut s = Splitter::new(framing);
        let mut events = vec![];
        for b in stream {
            events.extend(s.push(Bytes::copy_from_slice(&[*b])));
        }
        ways.push(events);
        ways
    }

    #[test]
    fn a_write_is_a_change_to_what_is_stored_leases_and_events_aside() {
        let is = |m: &str, path: &str| is_write(&m.parse().unwrap(), &path.parse().unwrap());
        assert!(is("POST", "/api/v1/namespaces/x/pods"));
        assert!(is(
            "PUT",
            "/apis/apps.kruise.io/v1alpha1/namespaces/x/clonesets/c/status"
        ));
        assert!(is("PATCH", "/api/v1/namespaces/x/persistentvolumeclaims/d"));
        assert!(is("DELETE", "/api/v1/namespaces/x/pods/p"));
        assert!(!is("GET", "/api/v1/namespaces/x/pods/p"));
        assert!(!is(
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kruise-system/leases/kruise-manager"
        ));
        assert!(!is("POST", "/api/v1/namespaces/x/events"));
        assert!(!is("PATCH", "/apis/events.k8s.io/v1/namespaces/x/events/e"));
    }

    #[test]
    fn json_events_are_whole_lines_across_any_chunk_boundary() {
        let a = r#"{"type":"ADDED","object":{"kind":"ConfigMap","data":{"k":"a}\"{"}}}"#;
        let b = r#"{"type":"MODIFIED","object":{"kind":"ConfigMap"}}"#;
        let stream = format!("{a}\n{b}\n");
        for events in split_every_way(Framing::Json, stream.as_bytes()) {
            assert_eq!(events, [format!("{a}\n"), format!("{b}\n")]);
        }
    }

    #[test]
    fn a_json_event_waits_for_its_newline_and_values_without_one_still_split() {
        let mut s = Splitter::new(Framing::Json);
        assert!(
            s.push(Bytes::from_static(b"{\"type\":\"ADDED\"}"))
                .is_empty()
        );
        assert_eq!(s.pending(), 16);
        assert_eq!(
            s.push(Bytes::from_static(b"\n")),
            ["{\"type\":\"ADDED\"}\n"]
        );
        let events = s.push(Bytes::from_static(b"{\"a\":1}{\"b\":2}\n"));
        assert_eq!(events, ["{\"a\":1}", "{\"b\":2}\n"]);
    }

    #[test]
    fn a_stream_that_is_not_json_is_forwarded_as_it_comes() {
        let mut s = Splitter::new(Framing::Json);
        assert_eq!(
            s.push(Bytes::from_static(b"{\"a\":1}\nnot json")),
            ["{\"a\":1}\n", "not json"]
        );
        assert_eq!(s.push(Bytes::from_static(b" more")), [" more"]);
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn protobuf_frames_split_across_any_chunk_boundary_and_a_partial_frame_waits() {
        let (a, b, empty) = (frame(b"first event"), frame(&[0u8; 300]), frame(b""));
        let stream = [a.clone(), b.clone(), empty.clone()].concat();
        for events in split_every_way(Framing::Protobuf, &stream) {
            assert_eq!(events, [a.as_slice(), b.as_slice(), empty.as_slice()]);
        }
        let mut s = Splitter::new(Framing::Protobuf);
        assert!(s.push(Bytes::copy_from_slice(&b[..200])).is_empty());
        assert_eq!(s.pending(), 200);
        assert_eq!(s.finish().unwrap().len(), 200);
    }

    #[test]
    fn raw_streams_pass_chunk_by_chunk() {
        let mut s = Splitter::new(Framing::Raw);
        assert_eq!(s.push(Bytes::from_static(b"abc")), ["abc"]);
        assert!(s.push(Bytes::new()).is_empty());
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn event_types_are_read_from_json_and_protobuf() {
        assert_eq!(
            event_type(Framing::Json, br#"{"object":{"type":"x"},"type":"ERROR"}"#).as_deref(),
            Some("ERROR")
        );
        // WatchEvent{type: "MODIFIED" (1), object: {raw: ...} (2)}, object first.
        let mut msg = vec![0x12, 3, 0x0a, 1, b'x'];
        msg.extend([0x0a, 8]);
        msg.extend(b"MODIFIED");
        assert_eq!(
            event_type(Framing::Protobuf, &frame(&msg)).as_deref(),
            Some("MODIFIED")
        );
        assert_eq!(
            event_type(Framing::Protobuf, &frame(&[0x0a, 9, b'x'])),
            None
        );
        assert_eq!(event_type(Framing::Raw, b"{\"type\":\"ADDED\"}"), None);
    }

    #[test]
    fn watches_are_recognized_by_query_or_path_and_named_by_resource() {
        let r = |u: &str| watched_resource(&u.parse().unwrap());
        assert_eq!(r("/api/v1/pods?watch=true").as_deref(), Some("pods"));
        assert_eq!(
            r("/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dx&watch=1")
                .as_deref(),
            Some("configmaps")
        );
        assert_eq!(
            r("/apis/apps.kruise.io/v1alpha1/namespaces/ns/clonesets?allowWatchBookmarks=true&watch=true")
                .as_deref(),
            Some("clonesets")
        );
        assert_eq!(
            r("/api/v1/watch/namespaces/ns/pods/p").as_deref(),
            Some("pods")
        );
        assert_eq!(
            r("/api/v1/namespaces?watch=true").as_deref(),
            Some("namespaces")
        );
        assert_eq!(
            r("/api/v1/namespaces/ns?watch=t").as_deref(),
            Some("namespaces")
        );
        assert_eq!(r("/api/v1/pods?watch=false"), None);
        assert_eq!(r("/api/v1/namespaces/ns/pods"), None);
        assert_eq!(r("/apis/apps/v1/deployments?watchy=true"), None);
        assert_eq!(r("/version?watch=true"), None);
    }

    #[test]
    fn framing_follows_the_content_type() {
        let of = |ct: &str, enc: Option<&str>| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
            if let Some(e) = enc {
                h.insert(header::CONTENT_ENCODING, e.parse().unwrap());
            }
            Framing::of(&h)
        };
        assert_eq!(of("application/json", None), Framing::Json);
        assert_eq!(of("application/json;stream=watch", None), Framing::Json);
        assert_eq!(
            of("application/vnd.kubernetes.protobuf;stream=watch", None),
            Framing::Protobuf
        );
        assert_eq!(of("application/cbor-seq", None), Framing::Raw);
        assert_eq!(of("application/json", Some("gzip")), Framing::Raw);
        assert_eq!(Framing::of(&HeaderMap::new()), Framing::Raw);
    }

    #[test]
    fn only_https_ip_addresses_are_upstreams() {
        assert_eq!(
            upstream_addr("https://127.0.0.1:6443").unwrap(),
            "127.0.0.1:6443".parse().unwrap()
        );
        assert!(upstream_addr("http://127.0.0.1:6443").is_err());
        assert!(upstream_addr("https://example.invalid:6443").is_err());
    }
}
