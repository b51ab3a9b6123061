//! Bringing a local cluster up: [`BringUp::run`] is where to start. It starts the components
//! in phases (etcd, the apiserver, the other components and the nodes, real nodes with their
//! registry), then waits for the cluster to be ready, each phase bounded by a timeout.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, PostParams};

use super::components::Inputs;
use super::{
    LocalCluster, LocalError, components, free_port, get_ok, kwok, node, pki, provisioner, registry,
};
use crate::cluster::admin_client;
use crate::wait::{self, Check};

/// The bring-up of a local cluster, in phases: etcd, the apiserver, the other components and
/// the nodes, then readiness. Each phase waits (bounded by `timeout`) before the next starts.
pub(super) struct BringUp<'a> {
    pub(super) inputs: Inputs<'a>,
    pub(super) ca: String,
    pub(super) timeout: Duration,
    pub(super) task: &'a crate::progress::Task,
}

impl BringUp<'_> {
    pub(super) async fn run(&self, cluster: &mut LocalCluster) -> Result<(), LocalError> {
        let client = self.control_plane(cluster).await?;
        self.components_and_nodes(cluster, &client).await?;
        self.real_nodes(cluster).await?;
        self.ready(cluster, &client).await
    }

    fn phase(&self, name: &str) {
        self.task.set(name);
        tracing::info!(phase = name, "cluster bring-up");
    }

    /// etcd, then kube-apiserver; returns the admin client once `/readyz` answers.
    async fn control_plane(&self, cluster: &mut LocalCluster) -> Result<kube::Client, LocalError> {
        let ports = self.inputs.ports;
        self.phase("etcd");
        cluster.spawn(&components::etcd(self.inputs))?;
        cluster
            .wait_until("etcd to accept connections", self.timeout, || async {
                std::net::TcpStream::connect(("127.0.0.1", ports.etcd_client))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .await?;
        self.phase("kube-apiserver");
        // Supervised, so that a perturbation can crash it and have it started again.
        cluster.apiserver =
            Some(cluster.spawn_supervised(&components::kube_apiserver(self.inputs))?);
        let client = admin_client(&self.inputs.layout.admin_kubeconfig()).await?;
        cluster.client = Some(client.clone());
        cluster
            .wait_until("kube-apiserver /readyz", self.timeout, || {
                let client = client.clone();
                async move { get_ok(&client, "/readyz").await }
            })
            .await?;
        Ok(client)
    }

    /// The controller manager, scheduler, kwok and the provisioner with its StorageClass; the
    /// profile's nodes.
    async fn components_and_nodes(
        &self,
        cluster: &mut LocalCluster,
        client: &kube::Client,
    ) -> Result<(), LocalError> {
        self.phase("controllers, scheduler, kwok, provisioner");
        for spec in [
            components::kube_controller_manager(self.inputs),
            components::kube_scheduler(self.inputs),
            components::kwok(self.inputs),
            components::provisioner(self.inputs),
        ] {
            cluster.spawn(&spec)?;
        }
        provisioner::create_default_storage_class(client)
            .await
            .map_err(LocalError::kube("create the default StorageClass"))?;
        let nodes: Api<Node> = Api::all(client.clone());
        for n in &self.inputs.profile.nodes {
            nodes
                .create(&PostParams::default(), &kwok::node(n))
                .await
                .map_err(LocalError::kube(format!("create node {}", n.name)))?;
        }
        Ok(())
    }

    /// Each real node: recorded first (so that teardown and `gc` find it), then its
    /// certificate and kubeconfig, directories, bridge and cgroups, its containerd (waited
    /// for) and its kubelet.
    async fn real_nodes(&self, cluster: &mut LocalCluster) -> Result<(), LocalError> {
        let Some(real) = &self.inputs.binaries.real else {
            return Ok(());
        };
        let layout = self.inputs.layout;
        let pki = pki::Pki::at(&layout.pki());
        self.phase("image registry");
        let port = free_port()?;
        let registry = registry::RegistryLayout::new(layout.dir.join("registry"));
        let tls = registry::RegistryTls::from_pki(&pki);
        std::fs::create_dir_all(registry.storage())
            .map_err(|e| LocalError::io(&registry.dir, e))?;
        std::fs::write(
            registry.config(),
            registry::config_yaml(&registry, port, &tls),
        )
        .map_err(|e| LocalError::io(&registry.config(), e))?;
        cluster.spawn(&registry::spec(&real.registry, &registry))?;
        let client = registry::RegistryClient::new(port, &self.ca)
            .map_err(|e| LocalError::Registry(e.to_string()))?;
        cluster
            .wait_until("the image registry", self.timeout, || {
                let client = client.clone();
                async move { client.ping().await.map_err(|e| e.to_string()) }
            })
            .await?;
        registry::push(&real.images, port, &self.ca)
            .await
            .map_err(|e| LocalError::Registry(format!("{e:#}")))?;
        cluster.state.registry_port = Some(port);
        cluster.save()?;
        let mirror = registry::Mirror {
            port,
            ca: pki.path("ca.crt"),
        };
        for spec in &self.inputs.profile.real_nodes {
            self.phase(&format!("real node {}", spec.name));
            let taken: Vec<[u8; 2]> = cluster.state.real_nodes.iter().map(|n| n.subnet).collect();
            let n = node::RealNode::plan(
                &layout.dir,
                spec,
                self.inputs.profile.real_node_taint,
                &taken,
                free_port()?,
            )?;
            cluster.state.real_nodes.push(n.clone());
            cluster.save()?;
            let stem = format!("node-{}", n.name);
            pki.issue_client(
                &stem,
                &format!("system:node:{}", n.name),
                Some("system:nodes"),
            )?;
            n.prepare(
                &real.tools,
                &pki.path("ca.crt"),
                &self.inputs.profile.kubernetes,
                &self.inputs.profile.feature_gates,
                &mirror,
            )?;
            let kc = n.dir.join("kubeconfig");
            std::fs::write(&kc, pki.kubeconfig(&cluster.state.server, &stem)?)
                .map_err(|e| LocalError::io(&kc, e))?;
            cluster.spawn(&n.containerd_spec(&real.tools))?;
            let socket = n.socket();
            cluster
                .wait_until(&format!("containerd of {}", n.name), self.timeout, || {
                    let socket = socket.clone();
                    async move {
                        std::os::unix::net::UnixStream::connect(&socket)
                            .map(|_| ())
                            .map_err(|e| format!("{}: {e}", socket.display()))
                    }
                })
                .await?;
            // Every kubelet of a host binds the same device-plugin socket, whatever its
            // `--root-dir` (kubelet's `pluginapi.KubeletSocket`): one that starts while another
            // removes the stale sockets there and binds fails with "address already in use".
            // So kubelets start one at a time host-wide, each holding the turn until it has
            // bound that socket (or exited: the readiness check below says so).
            let _turn = node::kubelet_turn().await?;
            let before = node::device_plugin_socket();
            cluster.spawn(&n.kubelet_spec(&real.kubelet))?;
            let _ = cluster
                .wait_until(
                    &format!("the kubelet of {} to bind its device-plugin socket", n.name),
                    Duration::from_secs(60),
                    || {
                        let now = node::device_plugin_socket();
                        async move {
                            match now.is_some() && now != before {
                                true => Ok(()),
                                false => Err("not bound yet".to_string()),
                            }
                        }
                    },
                )
                .await;
        }
        Ok(())
    }

    /// The components' health endpoints, every node Ready, the default service account.
    async fn ready(&self, cluster: &LocalCluster, client: &kube::Client) -> Result<(), LocalError> {
        let ports = self.inputs.ports;
        for (what, port) in [
            ("kube-controller-manager /healthz", ports.controller_manager),
            ("kube-scheduler /healthz", ports.scheduler),
        ] {
            let c = loopback_client(port, &self.ca)?;
            cluster
                .wait_until(what, self.timeout, || {
                    let c = c.clone();
                    async move { get_ok(&c, "/healthz").await }
                })
                .await?;
        }
        self.phase("nodes Ready");
        let nodes: Api<Node> = Api::all(client.clone());
        for n in self
            .inputs
            .profile
            .nodes
            .iter()
            .chain(&self.inputs.profile.real_nodes)
        {
            cluster
                .wait_node_ready(&nodes, &n.name, self.timeout)
                .await?;
        }
        self.phase("default service account");
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        let what = "service account default/default";
        wait::until(
            &sas,
            "default",
            what,
            self.timeout,
            |sa: Option<ServiceAccount>| {
                Box::pin(std::future::ready(Check::when(sa.is_some(), || {
                    "absent".into()
                })))
            },
        )
        .await?;
        Ok(())
    }
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .join("");
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap_or_default()
}

/// An unauthenticated client for a component's own loopback HTTPS port, trusting the
/// cluster CA.
fn loopback_client(port: u16, ca_pem: &str) -> Result<kube::Client, LocalError> {
    let url: http::Uri = format!("https://127.0.0.1:{port}")
        .parse()
        .expect("valid loopback uri");
    let mut config = kube::Config::new(url);
    config.root_cert = Some(vec![pem_to_der(ca_pem)]);
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    kube::Client::try_from(config).map_err(|e| {
        LocalError::Kubeconfig(crate::cluster::client::KubeconfigError {
            path: PathBuf::from(format!("127.0.0.1:{port}")),
            source: Box::new(e),
        })
    })
}
