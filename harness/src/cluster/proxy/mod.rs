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

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::local::pki::Pki;
use super::local::{LocalCluster, LocalError};

mod forward;
mod stream;
mod tls;

use self::forward::serve;
pub use self::stream::{Framing, Splitter, event_type, is_write, watched_resource};
use self::tls::{client_tls, server_tls, upstream_addr};

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
