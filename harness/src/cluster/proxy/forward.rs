//! Forwarding: [`serve`] accepts the clients' connections, [`forward`] passes each request to
//! the apiserver and its answer back, and a watch's answer goes through [`pump`], which applies
//! the resource's rules (hold, drop, close) event by event ([`Watch`]). Start with [`serve`],
//! which [`super::start`] spawns.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::{Framing, Shared, Splitter, event_type, is_write, watched_resource};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;
/// One client connection's connection to the apiserver, made on its first request and again
/// when the apiserver closed it.
type UpstreamSlot = Arc<tokio::sync::Mutex<Option<SendRequest<Incoming>>>>;

/// Accepts connections until shutdown; the connections are its children (aborted with it).
pub(super) async fn serve(
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
