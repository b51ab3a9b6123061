//! A cluster kept up for a person (`harness cluster up`): [`Session::start`] makes the cluster
//! with any provider and installs the controller through its [`Controller`] implementation;
//! [`Session::supervise`] then watches both until one fails (the caller races it with Ctrl-C).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cluster::any::{AnyCluster, Provider, ProviderConfig, ProviderKind};
use crate::cluster::local::LocalProvider;
use crate::cluster::{Profile, parse_key_values};
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

impl ControllerChoice {
    /// The controller `controller` (`NAME@TAG`) with its `gates` (`GATE=BOOL`), or none when
    /// no controller is named (then no gates may be given).
    pub fn parse<S: AsRef<str>>(
        controller: Option<&str>,
        gates: &[S],
    ) -> anyhow::Result<Option<Self>> {
        let Some(c) = controller else {
            if !gates.is_empty() {
                bail!("--controller-gates needs --controller");
            }
            return Ok(None);
        };
        let mut parsed = BTreeMap::new();
        for (k, v) in parse_key_values(gates)? {
            let b = v.parse::<bool>().with_context(|| {
                format!("parse controller gate `{k}={v}`: the value must be true or false")
            })?;
            parsed.insert(k, b);
        }
        Ok(Some(Self {
            reference: c.parse()?,
            gates: parsed,
        }))
    }
}

/// What `harness cluster up` asks for, beside the profile and the controller.
#[derive(Debug, Clone)]
pub struct Request {
    /// Cluster name (also its directory name).
    pub name: String,
    /// A fixed apiserver port (local provider).
    pub apiserver_port: Option<u16>,
    /// Leave the cluster running (local provider).
    pub detach: bool,
    /// Keep the cluster directory after it stops (local provider).
    pub keep_dir: bool,
    /// Where the cluster comes from.
    pub provider: ProviderConfig,
}

impl Request {
    /// Refuses a name that cannot be a directory name, and settings of another provider.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!(
                "use cluster name `{}`: only letters, digits, `-` and `_` are allowed",
                self.name
            );
        }
        self.provider.validate()?;
        if !self.is_local() && (self.apiserver_port.is_some() || self.detach || self.keep_dir) {
            bail!("--apiserver-port, --detach and --keep-dir are for --provider local");
        }
        Ok(())
    }

    /// Whether the cluster is the local provider's.
    pub fn is_local(&self) -> bool {
        self.provider.kind == ProviderKind::Local
    }

    /// What would run for a cluster of `profile`, one line each: the local provider's
    /// component processes with their arguments (found or built with `local`), or the other
    /// provider's commands; `logs` is where kind would export logs.
    pub async fn dry_run(
        &self,
        profile: &Profile,
        local: &LocalProvider,
        logs: &std::path::Path,
    ) -> anyhow::Result<String> {
        if !self.is_local() {
            return Ok(self.provider.dry_run(&self.name, profile, logs)?);
        }
        let binaries = local.binaries(profile).await?;
        Ok(local
            .plan(&self.name, profile, &binaries)
            .iter()
            .map(|spec| format!("{spec}\n"))
            .collect())
    }
}

pub use crate::controller::SETTLE_TIMEOUT;

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
            if cluster.pulls_only_from_harness() {
                crate::run::push_run_images(&cluster, implementation.as_ref(), toolchain).await?;
            }
            let host = Host::of(&mut cluster).await?;
            let i = implementation
                .install(host, toolchain, &c.gates)
                .await
                .with_context(|| format!("install {}", c.reference))?;
            // A person may pull images at once: the node daemons' NodeImages exist too.
            i.settled(&cluster.client().await?, SETTLE_TIMEOUT)
                .await
                .with_context(|| format!("settle {}", c.reference))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str) -> Request {
        Request {
            name: name.into(),
            apiserver_port: None,
            detach: false,
            keep_dir: false,
            provider: ProviderConfig::default(),
        }
    }

    #[test]
    fn a_cluster_name_is_a_directory_name() {
        assert!(request("harness-1_a").validate().is_ok());
        for bad in ["", "a/b", "a b", "..", "ä"] {
            let e = request(bad).validate().unwrap_err().to_string();
            assert!(e.contains("only letters, digits"), "{bad}: {e}");
        }
    }

    #[test]
    fn local_only_settings_are_refused_for_other_providers() {
        let mut r = request("h");
        r.provider.kind = ProviderKind::Kind;
        assert!(r.validate().is_ok());
        r.detach = true;
        let e = r.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "--apiserver-port, --detach and --keep-dir are for --provider local"
        );
        let mut r = request("h");
        r.provider.context = Some("c".into());
        let e = r.validate().unwrap_err().to_string();
        assert_eq!(e, "--context is for --provider existing");
    }

    #[test]
    fn controller_gates_are_booleans_and_need_a_controller() {
        let none = ControllerChoice::parse::<&str>(None, &[]).unwrap();
        assert!(none.is_none());
        let e = ControllerChoice::parse(None, &["A=true"]).unwrap_err();
        assert_eq!(e.to_string(), "--controller-gates needs --controller");
        let c = ControllerChoice::parse(Some("openkruise@v1.9.0"), &["A=true,B=false"])
            .unwrap()
            .unwrap();
        assert_eq!(c.reference.to_string(), "openkruise@v1.9.0");
        assert_eq!(
            c.gates.into_iter().collect::<Vec<_>>(),
            [("A".to_string(), true), ("B".to_string(), false)]
        );
        let e = ControllerChoice::parse(Some("openkruise@v1.9.0"), &["A=yes"]).unwrap_err();
        assert!(e.to_string().contains("must be true or false"), "{e}");
    }
}
