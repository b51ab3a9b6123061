//! Where the clusters come from: [`ProviderArgs`] (the `--provider` flags every command that
//! makes clusters shares), and the `harness cluster` commands ([`ClusterCommand`], with
//! [`UpArgs`] and the [`ProfileArgs`] a cluster is built to).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::cluster::any::{self, ProviderConfig};
use crate::cluster::{Profile, parse_key_values};
use crate::toolchain::KubeVersion;

/// Where clusters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderKind {
    /// The embedded default: a control plane as local processes built from Go modules.
    Local,
    /// kind (needs Docker); the harness builds the kind release its node image belongs to.
    Kind,
    /// k3s in a container through testcontainers (needs Docker and the `k3s` cargo feature).
    K3s,
    /// A cluster you already have (`--kubeconfig`, `--context`); the harness creates only
    /// namespaced test objects there and removes only those.
    Existing,
}

#[derive(Debug, Args)]
pub struct ProviderArgs {
    /// Where the cluster comes from.
    #[arg(long, value_enum, default_value_t = ProviderKind::Local)]
    pub provider: ProviderKind,
    /// Kubeconfig of the existing cluster (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the existing cluster to use (required with --provider existing; the
    /// current context is never used implicitly).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The API server URL the context must point at; the run is refused if it points
    /// elsewhere.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// kind binary to use instead of building the kind release the node image belongs to.
    #[arg(long, value_name = "PATH")]
    pub kind_binary: Option<PathBuf>,
    /// kind on a node image assembled here from Debian packages and Go modules (no registry
    /// needed), in a private Docker daemon unless DOCKER_HOST names one.
    #[arg(long)]
    pub kind_offline: bool,
}

impl ProviderArgs {
    /// The provider as the library takes it.
    pub fn config(&self) -> ProviderConfig {
        ProviderConfig {
            kind: match self.provider {
                ProviderKind::Local => any::ProviderKind::Local,
                ProviderKind::Kind => any::ProviderKind::Kind,
                ProviderKind::K3s => any::ProviderKind::K3s,
                ProviderKind::Existing => any::ProviderKind::Existing,
            },
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            server: self.server.clone(),
            kind_binary: self.kind_binary.clone(),
            kind_offline: self.kind_offline,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start a cluster and keep it running until Ctrl-C (a local one can detach with
    /// --detach).
    Up(Box<UpArgs>),
    /// Stop a cluster and remove its directory.
    Down {
        /// Cluster name.
        name: String,
    },
    /// List clusters with their state and kubeconfig.
    List,
    /// Write the kind config of every profile the suites use (kind-configs/), or check that
    /// the files there are current.
    Configs {
        /// The directory.
        #[arg(long, default_value = "kind-configs")]
        dir: PathBuf,
        /// Only compare; exit 1 and name the files that differ.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Kubernetes version (minor like 1.32, or the pinned patch like v1.32.5).
    #[arg(long = "k8s", default_value = crate::toolchain::versions::DEFAULT_KUBERNETES)]
    pub kubernetes: String,
    /// Feature gates for the control plane, e.g. InPlacePodVerticalScaling=true (repeatable,
    /// comma-separated).
    #[arg(long = "feature-gates", value_name = "GATE=BOOL")]
    pub feature_gates: Vec<String>,
    /// apiserver --runtime-config entries, e.g. api/all=true (repeatable, comma-separated).
    #[arg(long = "runtime-config", value_name = "KEY=VALUE")]
    pub runtime_config: Vec<String>,
    /// Number of fake nodes.
    #[arg(long, default_value_t = 4)]
    pub nodes: usize,
    /// Zones the nodes are spread over (topology.kubernetes.io/zone), round-robin.
    #[arg(long, value_delimiter = ',', default_value = "zone-a,zone-b")]
    pub zones: Vec<String>,
    /// Extra label for every node (repeatable).
    #[arg(long = "node-label", value_name = "KEY=VALUE")]
    pub node_labels: Vec<String>,
    /// Number of real nodes beside the fake ones: a kubelet and a containerd each, running
    /// real containers (local provider; needs root, and Debian's containerd, runc,
    /// containernetworking-plugins, iptables and iproute2, which the harness installs when
    /// they are missing). Real nodes are tainted `harness.io/real-node=true:NoSchedule` and
    /// labelled `harness.io/node=real`.
    #[arg(long = "real-nodes", default_value_t = 0)]
    pub real_nodes: usize,
    /// How long an in-place container restart (new image) takes on the fake nodes, in
    /// milliseconds (each takes up to half as long again); the default is what the harness's
    /// real nodes take.
    #[arg(long = "in-place-restart-ms", value_name = "MS",
          default_value_t = crate::cluster::DEFAULT_IN_PLACE_RESTART_MS)]
    pub in_place_restart_ms: u64,
    /// How long a deleted pod's containers take to exit on SIGTERM on the fake nodes, in
    /// milliseconds (the grace period caps it; a pod's `harness.kwok/stop-seconds` annotation
    /// sets its own).
    #[arg(long = "pod-stop-ms", value_name = "MS",
          default_value_t = crate::cluster::DEFAULT_STOP_MS)]
    pub pod_stop_ms: u64,
    /// A YAML file of objects to create once the cluster is up, before the controller starts
    /// (what a controller reads only at start, e.g. OpenKruise's `kruise-configuration`
    /// ConfigMap in `kruise-system`); missing namespaces are made first (repeatable).
    #[arg(long = "seed", value_name = "FILE")]
    pub seed: Vec<PathBuf>,
}

impl ProfileArgs {
    pub fn profile(&self) -> anyhow::Result<Profile> {
        let version: KubeVersion = self.kubernetes.parse()?;
        let mut p = Profile::new(version);
        p.add_gates(&self.feature_gates)?;
        p.add_runtime_config(&self.runtime_config)?;
        let zones: Vec<&str> = self.zones.iter().map(String::as_str).collect();
        let labels: BTreeMap<String, String> = parse_key_values(&self.node_labels)?;
        p.set_nodes(self.nodes, &zones, &labels)?;
        p.set_real_nodes(self.real_nodes, &zones, &labels)?;
        p.pod_timing = crate::cluster::PodTiming {
            in_place_restart_ms: self.in_place_restart_ms,
            stop_ms: self.pod_stop_ms,
        };
        p.objects = crate::cluster::seed::load(&self.seed)?;
        Ok(p)
    }
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Cluster name (also its directory name).
    #[arg(long, default_value = "harness")]
    pub name: String,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Fixed apiserver port on 127.0.0.1 (default: a free one).
    #[arg(long)]
    pub apiserver_port: Option<u16>,
    /// Return once ready and leave the cluster running; end it with `harness cluster down`.
    #[arg(long)]
    pub detach: bool,
    /// Keep the cluster directory (logs, certificates) after it stops.
    #[arg(long)]
    pub keep_dir: bool,
    /// Print the processes or commands that would run, with their arguments, and start
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub controller: ControllerArgs,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Controller under test to install, e.g. openkruise@v1.9.0.
    #[arg(long = "controller", value_name = "NAME@TAG")]
    pub controller: Option<String>,
    /// Feature gates for the controller manager, e.g.
    /// RecreatePodWhenChangeVCTInCloneSetGate=true (repeatable, comma-separated).
    #[arg(long = "controller-gates", value_name = "GATE=BOOL")]
    pub controller_gates: Vec<String>,
}

impl ControllerArgs {
    /// The controller to install with its gates, if one is named.
    pub fn choice(&self) -> anyhow::Result<Option<crate::up::ControllerChoice>> {
        crate::up::ControllerChoice::parse(self.controller.as_deref(), &self.controller_gates)
    }
}

impl UpArgs {
    /// The request as the library takes it.
    pub fn request(&self) -> crate::up::Request {
        crate::up::Request {
            name: self.name.clone(),
            apiserver_port: self.apiserver_port,
            detach: self.detach,
            keep_dir: self.keep_dir,
            provider: self.provider.config(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Command;
    use crate::cli::args::parse;

    #[test]
    fn cluster_up_flags_become_a_profile_and_a_request() {
        let Command::Cluster(ClusterCommand::Up(args)) = parse(&[
            "cluster",
            "up",
            "--name",
            "c1",
            "--feature-gates",
            "InPlacePodVerticalScaling=true",
            "--nodes",
            "2",
            "--provider",
            "kind",
            "--kind-binary",
            "/opt/kind",
        ]) else {
            panic!("cluster up");
        };
        let p = args.profile.profile().unwrap();
        assert_eq!(p.kubernetes, KubeVersion::default_version());
        assert_eq!(p.nodes.len(), 2);
        let r = args.request();
        assert_eq!(r.name, "c1");
        assert_eq!(r.provider.kind, any::ProviderKind::Kind);
        assert_eq!(r.provider.kind_binary, Some(PathBuf::from("/opt/kind")));
        assert!(r.validate().is_ok());
    }
}
