//! A cluster kept up for a person (`harness cluster up`): [`Session::start`] makes the cluster
//! with any provider and installs the controller through its [`Controller`] implementation;
//! [`Session::supervise`] then watches both until one fails (the caller races it with Ctrl-C).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::cluster::Profile;
use crate::cluster::any::{AnyCluster, Provider};
use crate::controller::{ControllerRef, Host, Installation};
use crate::toolchain::Toolchain;

/// A controller to install, with its feature gates.
#[derive(Debug, Clone)]
pub struct ControllerChoice {
    /// Which controller, at which version.
    pub reference: ControllerRef,
    /// Its feature gates.
    pub gates: BTreeMap<String, bool>,
}

/// What [`Session::start_with`] does beyond making the cluster and installing the controller.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// Routes the controller's manager through an apiserver proxy on the local provider (see
    /// [`ControllerRef::controller_behind_proxy`]); its handle is then
    /// [`Installation::proxy`]. Off by default.
    pub proxy: bool,
}

/// A running cluster, with the controller installed if one was asked for.
#[derive(Debug)]
pub struct Session {
    /// The cluster.
    pub cluster: AnyCluster,
    /// The installed controller.
    pub installation: Option<Installation>,
    started: Instant,
}

impl Session {
    /// Makes cluster `name` of `profile` and installs `controller` into it.
    pub async fn start(
        provider: &Provider,
        toolchain: &Toolchain,
        name: &str,
        profile: &Profile,
        controller: Option<&ControllerChoice>,
    ) -> anyhow::Result<Self> {
        let options = StartOptions::default();
        Self::start_with(provider, toolchain, name, profile, controller, options).await
    }

    /// [`Session::start`], as `options` say.
    pub async fn start_with(
        provider: &Provider,
        toolchain: &Toolchain,
        name: &str,
        profile: &Profile,
        controller: Option<&ControllerChoice>,
        options: StartOptions,
    ) -> anyhow::Result<Self> {
        let mut cluster = provider
            .create(name, profile)
            .await
            .with_context(|| format!("start cluster `{name}`"))?;
        if !profile.objects.is_empty() {
            let client = cluster.client().await?;
            crate::cluster::seed::create(&client, &profile.objects).await?;
        }
        let mut installation = None;
        if let Some(c) = controller {
            let implementation = match options.proxy {
                true => c.reference.controller_behind_proxy(),
                false => c.reference.controller(),
            };
            let host = Host::of(&mut cluster).await?;
            let i = implementation
                .install(host, toolchain, &c.gates)
                .await
                .with_context(|| format!("install {}", c.reference))?;
            installation = Some(i);
        }
        Ok(Self {
            cluster,
            installation,
            started: Instant::now(),
        })
    }

    /// Returns (with the error) once the controller exits, restarts or is denied by its RBAC,
    /// or a local cluster's component exits; checked every `every`.
    pub async fn supervise(&self, every: Duration) -> anyhow::Error {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if let Some(i) = &self.installation
                && let Err(e) = i.check(&crate::controller::Window::all()).await
            {
                return self.failed(e.into());
            }
            if let AnyCluster::Local(c) = &self.cluster
                && let Err(e) = c.check_alive()
            {
                return self.failed(e.into());
            }
        }
    }

    /// Keeps (or not) a local cluster's directory when it ends; other providers keep none.
    pub fn keep_dir(&mut self, keep: bool) {
        if let AnyCluster::Local(c) = &mut self.cluster {
            c.keep_dir(keep);
        }
    }

    /// Leaves a local cluster running and says how to end it (other providers' clusters are
    /// removed: only local ones outlive the harness).
    pub fn detach(self) -> anyhow::Result<String> {
        match self.cluster {
            AnyCluster::Local(c) => {
                let state = c.detach()?;
                Ok(format!(
                    "cluster `{}` left running; end it with `harness cluster down {}`",
                    state.name, state.name
                ))
            }
            other => other.keep_for_inspection(),
        }
    }

    fn failed(&self, e: anyhow::Error) -> anyhow::Error {
        e.context(format!(
            "cluster `{}` failed after {:.0?}",
            self.cluster.name(),
            Duration::from_secs(self.started.elapsed().as_secs())
        ))
    }
}
