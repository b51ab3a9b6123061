//! What an install starts: start with [`Installation`], a controller's running [`Component`]s,
//! each checked within a log [`Window`] for exits, restarts, RBAC denials and panics.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;

use super::logs::{LogTail, panic_in};
use super::{ControllerError, ControllerRef, Window};
use crate::cluster::proxy::ProxyHandle;

/// One running part of an installed controller (OpenKruise: its manager, and on real nodes a
/// node daemon per node).
pub trait Component: fmt::Debug + Send + Sync {
    /// Its name (`kruise-manager`).
    fn name(&self) -> &str;

    /// Fails if it exited, restarted, or was denied by the RBAC it ships — within `window`
    /// (what its log says outside the window is left out).
    fn check<'a>(&'a self, window: &'a Window) -> BoxFuture<'a, Result<(), ControllerError>>;

    /// Its log file, when it runs as a local process.
    fn log(&self) -> Option<&Path>;

    /// Starts it again if it exited and something restarts it (as a kubelet restarts a pod's
    /// container), waiting until it is ready: how it ended, or `None` when it was running.
    fn revive(&self) -> BoxFuture<'_, Result<Option<String>, ControllerError>> {
        Box::pin(async { Ok(None) })
    }

    /// Kills it at once (a crash) and has what restarts it start it again, waiting until it
    /// is ready: `false`, and it is left alone, when nothing would start it again.
    fn restart<'a>(
        &'a self,
        client: &'a kube::Client,
    ) -> BoxFuture<'a, Result<bool, ControllerError>> {
        let _ = client;
        Box::pin(async { Ok(false) })
    }

    /// Waits, up to `timeout`, until what the component acts through but does not make itself
    /// exists (OpenKruise's node daemon: its node's NodeImage, which the manager makes some
    /// time after the node turned Ready). Installing waits for readiness only; whatever needs
    /// more (a suite that pulls images at once, a cluster handed to a user) waits for this.
    fn settled<'a>(
        &'a self,
        client: &'a kube::Client,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), ControllerError>> {
        let _ = (client, timeout);
        Box::pin(async { Ok(()) })
    }
}

/// How long a new installation may take to settle ([`Installation::settled`]): OpenKruise's
/// NodeImages come 30 s after their nodes turned Ready by default.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(180);

/// A controller installed into a cluster: its running components, and the apiserver proxy in
/// front of its manager when it was installed with one.
#[derive(Debug)]
pub struct Installation {
    /// What was installed.
    pub reference: ControllerRef,
    /// Its components.
    pub components: Vec<Box<dyn Component>>,
    pub(super) proxy: Option<ProxyHandle>,
}

impl Installation {
    /// What installing `reference` started: its `components`, its manager talking to the
    /// apiserver directly.
    pub fn new(reference: ControllerRef, components: Vec<Box<dyn Component>>) -> Self {
        Self {
            reference,
            components,
            proxy: None,
        }
    }

    /// The apiserver proxy its manager talks through (see [`ControllerRef::controller_behind_proxy`]),
    /// for stale-view perturbations; `None` when it talks to the apiserver directly.
    pub fn proxy(&self) -> Option<&ProxyHandle> {
        self.proxy.as_ref()
    }

    /// Fails with the first component that exited, restarted or was denied by its RBAC within
    /// `window`.
    pub async fn check(&self, window: &Window) -> Result<(), ControllerError> {
        for c in &self.components {
            c.check(window).await?;
        }
        Ok(())
    }

    /// Starts again every component that exited and has a supervisor, each ready when this
    /// returns: the components started again, each with how it ended.
    pub async fn revive(&self) -> Result<Vec<String>, ControllerError> {
        let mut out = vec![];
        for c in &self.components {
            if let Some(status) = c.revive().await? {
                out.push(format!("{} ({status})", c.name()));
            }
        }
        Ok(out)
    }

    /// Crashes every component something restarts ([`Component::restart`]) and waits until
    /// each is ready again: their names.
    pub async fn restart(&self, client: &kube::Client) -> Result<Vec<String>, ControllerError> {
        let mut out = vec![];
        for c in &self.components {
            if c.restart(client).await? {
                out.push(c.name().to_string());
            }
        }
        Ok(out)
    }

    /// Waits until every component has settled ([`Component::settled`]).
    pub async fn settled(
        &self,
        client: &kube::Client,
        timeout: Duration,
    ) -> Result<(), ControllerError> {
        for c in &self.components {
            c.settled(client, timeout).await?;
        }
        Ok(())
    }

    /// A window opening now, for a scenario in `namespace`.
    pub fn window(&self, namespace: &str) -> Window {
        Window::opening(&self.logs(), Some(namespace))
    }

    /// The log files of the components that run as local processes.
    pub fn logs(&self) -> Vec<&Path> {
        self.components.iter().filter_map(|c| c.log()).collect()
    }

    /// A scenario's tripwire (`crate::scenario::steps::Tripwire`): asked, it says whether a
    /// component has logged, since this call, a recovered panic naming `namespace`
    /// ([`panic_in`]); none when no component logs to a local file.
    pub fn panic_tripwire(
        &self,
        namespace: &str,
    ) -> Option<std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>> {
        let logs = self.logs();
        if logs.is_empty() {
            return None;
        }
        let tails =
            std::sync::Mutex::new(logs.into_iter().map(LogTail::at_end).collect::<Vec<_>>());
        let namespace = namespace.to_string();
        Some(std::sync::Arc::new(move || {
            let mut tails = tails.lock().ok()?;
            tails
                .iter_mut()
                .find_map(|t| panic_in(&t.next_lines(), &namespace))
        }))
    }
}
