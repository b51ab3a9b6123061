//! A controller manager run as a local process beside the local provider's control plane:
//! start with [`Manager`], the component. What any component running as a local process uses
//! is here too: its ServiceAccount's token ([`service_account_token`], so it runs with the
//! RBAC its release ships), its health endpoint ([`http_get_status`]), its leader-election
//! lease ([`delete_lease`]) and its check ([`check_local_process`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;

use super::logs::log_findings;
use super::{Component, ControllerError, Window};
use crate::cluster::local::LocalError;
use crate::process::{ProcRecord, Supervisor, log_tail, log_tail_before_restart};

/// A token of ServiceAccount `namespace/name` (a manager's, a node component's): its identity
/// when it runs as a local process, so it gets exactly the RBAC its release ships.
pub async fn service_account_token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, ControllerError> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let sas: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(48 * 3600),
            ..Default::default()
        },
        ..Default::default()
    };
    let token = sas
        .create_token_request(name, &Default::default(), &request)
        .await
        .map_err(ControllerError::kube(format!(
            "request a token for {namespace}/{name}"
        )))?;
    Ok(token.status.map(|s| s.token).unwrap_or_default())
}

/// The status code of `GET http://127.0.0.1:<port><path>` (a health endpoint), over one
/// HTTP/1.1 connection of hyper's; the error says what failed, with its cause.
pub async fn http_get_status(port: u16, path: &str) -> Result<u16, String> {
    use hyper_util::rt::TokioIo;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
    let http = |e: hyper::Error| match std::error::Error::source(&e) {
        Some(cause) => format!("GET {path}: {e}: {cause}"),
        None => format!("GET {path}: {e}"),
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(http)?;
    let driver = tokio::spawn(conn);
    let request = http::Request::get(path)
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = sender
        .send_request(request)
        .await
        .map(|r| r.status().as_u16())
        .map_err(http);
    drop(sender);
    driver.abort();
    status
}

/// Deletes leader-election Lease `namespace/name`, if there is one: the next manager leads at
/// once instead of waiting for the one a stopped or killed leader held to expire.
pub async fn delete_lease(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), ControllerError> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), namespace);
    match leases.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(ControllerError::Kube {
            action: format!("delete the lease {namespace}/{name}"),
            source: e,
        }),
    }
}

/// A running controller manager installed into a cluster.
#[derive(Debug, Clone)]
pub struct Manager {
    /// Process name (`kruise-manager`).
    pub name: String,
    /// Release tag.
    pub version: String,
    /// The process.
    pub record: ProcRecord,
    /// Its log file.
    pub log: PathBuf,
    /// Its webhook port (0: it serves no webhooks).
    pub webhook_port: u16,
    /// Its health-probe port.
    pub health_port: u16,
    /// Its feature gates.
    pub gates: BTreeMap<String, bool>,
    /// What starts it again when it exits, if anything does.
    pub supervisor: Option<Supervisor>,
    /// Its leader-election Lease (namespace, name), if it elects a leader: a restart
    /// ([`Component::restart`]) deletes it, so that the manager started again leads at once
    /// instead of waiting for the lease its killed predecessor held to expire.
    pub lease: Option<(String, String)>,
}

impl Component for Manager {
    fn name(&self) -> &str {
        &self.name
    }

    fn check<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, Result<(), ControllerError>> {
        Box::pin(async move {
            // An exit is reported once, with the manager started again and ready.
            if let Some(status) = self.revive().await? {
                return Err(self.exited(&status));
            }
            self.check_process(window)
        })
    }

    fn log(&self) -> Option<&Path> {
        Some(&self.log)
    }

    fn restart<'a>(
        &'a self,
        client: &'a kube::Client,
    ) -> BoxFuture<'a, Result<bool, ControllerError>> {
        Box::pin(self.crash_and_restart(client))
    }

    fn revive(&self) -> BoxFuture<'_, Result<Option<String>, ControllerError>> {
        Box::pin(async move {
            let Some(s) = &self.supervisor else {
                return Ok(None);
            };
            // Whoever asks while another starts it again (a trial beside the one that met the
            // exit) goes on once it is ready, not while it starts.
            let _one = s.reviving().lock().await;
            let Some(status) = s.revive().map_err(LocalError::from)? else {
                return Ok(None);
            };
            // Ready again: the same certificates and ports, so the webhooks answer once
            // /readyz does.
            let what = format!("{} started again after it exited ({status})", self.name);
            self.wait_ready(&what, Duration::from_secs(120)).await?;
            Ok(Some(status))
        })
    }
}

impl Manager {
    /// [`Component::restart`]: a supervised manager killed, started again and ready.
    async fn crash_and_restart(&self, client: &kube::Client) -> Result<bool, ControllerError> {
        let Some(s) = &self.supervisor else {
            return Ok(false);
        };
        s.current().kill();
        if let Some((namespace, name)) = &self.lease {
            delete_lease(client, namespace, name).await?;
        }
        // A killed Go process is a zombie (not alive) while its other threads still exit, and
        // cannot be reaped, so started again, until they have.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if self.revive().await?.is_some() {
                return Ok(true);
            }
            if std::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(ControllerError::ManagerExited {
            name: self.name.clone(),
            version: self.version.clone(),
            how: "killed to restart it; not started again within 10 s".into(),
            log: self.log.clone(),
            tail: log_tail(&self.log, 20),
        })
    }

    /// Waits up to `timeout` until its `/readyz` on the health port answers 200 (`what` names
    /// the wait in its error).
    pub async fn wait_ready(&self, what: &str, timeout: Duration) -> Result<(), ControllerError> {
        let port = self.health_port;
        crate::wait::poll(
            what,
            timeout,
            Duration::from_millis(200),
            move || async move {
                match http_get_status(port, "/readyz").await {
                    Ok(200) => crate::wait::Check::Met,
                    Ok(code) => crate::wait::Check::Pending(format!("HTTP {code}")),
                    Err(e) => crate::wait::Check::Pending(e),
                }
            },
        )
        .await?;
        Ok(())
    }

    /// Fails if the manager exited (with its log tail; a supervised one is started again) or
    /// its log shows RBAC denials of its own ServiceAccount or a panic, within `window`.
    pub fn check_process(&self, window: &Window) -> Result<(), ControllerError> {
        let record = match &self.supervisor {
            Some(s) => {
                if let Some(status) = s.revive().map_err(LocalError::from)? {
                    return Err(self.exited(&status));
                }
                s.current()
            }
            None => self.record.clone(),
        };
        check_local_process(&self.name, &self.version, &record, &self.log, window)
    }

    /// The error of an exit its supervisor answered by starting it again.
    fn exited(&self, status: &str) -> ControllerError {
        ControllerError::ManagerExited {
            name: self.name.clone(),
            version: self.version.clone(),
            how: format!("{status}; started again"),
            log: self.log.clone(),
            tail: log_tail_before_restart(&self.log, 20),
        }
    }
}

/// Fails if the local process `record` (component `name` at `version`) exited, with the tail
/// of its `log`, or its log shows RBAC denials of its own ServiceAccount or a panic, within
/// `window`. Shared by every component that runs as a local process.
pub(crate) fn check_local_process(
    name: &str,
    version: &str,
    record: &ProcRecord,
    log: &Path,
    window: &Window,
) -> Result<(), ControllerError> {
    if !record.alive() {
        return Err(ControllerError::ManagerExited {
            name: name.into(),
            version: version.into(),
            how: "no longer running; its status is not known here".into(),
            log: log.to_path_buf(),
            tail: log_tail(log, 20),
        });
    }
    log_findings(name, version, &window.read(log), window)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::process::{ComponentSpec, Process};

    #[tokio::test]
    async fn who_asks_while_another_starts_the_manager_again_goes_on_once_it_is_ready() {
        let dir = tempfile::tempdir().unwrap();
        // Exits the first time, runs the second.
        let once = dir.path().join("started-once");
        let spec = ComponentSpec {
            name: "m".into(),
            binary: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                format!(
                    "if [ -e {f} ]; then exec sleep 60; else touch {f}; exit 3; fi",
                    f = once.display()
                ),
            ],
            env: vec![],
            clear_env: false,
            dir: None,
        };
        let log = dir.path().join("m.log");
        let p = Process::spawn(&spec, &log).unwrap();
        let first = p.record().clone();
        let procs = Arc::new(Mutex::new(vec![p]));
        let supervisor = Supervisor::new(
            spec,
            log.clone(),
            procs.clone(),
            Arc::new(|_, _| Ok(())),
            first.clone(),
        );
        // Its health port answers 503 three times, then 200.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let ready = Arc::new(AtomicBool::new(false));
        let server = tokio::spawn({
            let ready = ready.clone();
            async move {
                for n in 1.. {
                    let (mut s, _) = listener.accept().await.unwrap();
                    let mut request = [0u8; 1024];
                    let _ = s.read(&mut request).await;
                    let status = match n > 3 {
                        true => {
                            ready.store(true, SeqCst);
                            "200 OK"
                        }
                        false => "503 Service Unavailable",
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                    let _ = s.write_all(answer.as_bytes()).await;
                }
            }
        });
        let m = Manager {
            name: "m".into(),
            version: "v0".into(),
            record: first,
            log,
            webhook_port: 0,
            health_port: port,
            gates: Default::default(),
            supervisor: Some(supervisor),
            lease: None,
        };
        while procs.lock().unwrap()[0].exited().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Two trials ask at once: one starts it again; neither goes on before it is ready.
        let ask = || async {
            let r = m.revive().await.unwrap();
            (r, ready.load(SeqCst))
        };
        let (a, b) = futures::join!(ask(), ask());
        procs.lock().unwrap()[0].stop(Duration::from_millis(100));
        server.abort();
        let mut revived = [a.0.clone(), b.0.clone()];
        revived.sort();
        assert_eq!(revived, [None, Some("exit status: 3".to_string())]);
        assert!(a.1 && b.1, "went on before it was ready: {a:?} {b:?}");
    }
}
