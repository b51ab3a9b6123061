//! A kind cluster the harness created: [`KindCluster`], deleted (logs exported first) when
//! destroyed or dropped; on an offline node image, set up as kindnetd and
//! local-path-provisioner would.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{CommandLine, KindError, KindPlan, KindProvider, cni, tail};
use crate::cluster::Cluster;

/// What kube-proxy's iptables rules say of the apiserver's Service (its comment).
const KUBERNETES_SERVICE_RULE: &str = "default/kubernetes:https";

/// Where the volumes of the `standard` class go on a node of an offline image.
pub const OFFLINE_VOLUMES: &str = "/var/lib/harness-volumes";

impl KindCluster {
    /// What kindnetd and local-path-provisioner would do on a kind node image, for a cluster
    /// on an offline image that has neither: once every one of the `nodes` nodes has its pod
    /// range, each gets its pod network by `docker exec` ([`cni::commands`]); then the nodes
    /// must turn Ready, and the harness's provisioner serves the `standard` class.
    pub(super) async fn offline_setup(&mut self, nodes: usize) -> Result<(), KindError> {
        use k8s_openapi::api::core::v1::Node;
        let fail = |detail: String| KindError::Network {
            name: self.name.clone(),
            detail,
        };
        let client = self.client().await.map_err(|e| fail(format!("{e:#}")))?;
        let api: kube::Api<Node> = kube::Api::all(client.clone());
        let list = |api: kube::Api<Node>| async move {
            api.list(&Default::default())
                .await
                .map(|l| serde_json::to_value(l).expect("serializes"))
                .map_err(|e| format!("list nodes: {e}"))
        };
        crate::wait::poll(
            "every node to have its pod range",
            Duration::from_secs(300),
            Duration::from_secs(1),
            || {
                let api = api.clone();
                async move {
                    match list(api).await.and_then(|l| cni::nodes(&l)) {
                        Ok(n) if n.len() == nodes => crate::wait::Check::Met,
                        Ok(n) => crate::wait::Check::Pending(format!(
                            "{} of {nodes} nodes registered",
                            n.len()
                        )),
                        Err(e) => crate::wait::Check::Pending(e),
                    }
                }
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        // Pod ranges, once given, do not change.
        let found = list(api.clone())
            .await
            .and_then(|l| cni::nodes(&l))
            .map_err(fail)?;
        for node in &found {
            for cmd in cni::commands(node, &found) {
                let line = self.provider.docker(
                    ["exec".to_string(), node.name.clone()]
                        .into_iter()
                        .chain(cmd),
                );
                let provider = self.provider.clone();
                let out =
                    tokio::task::spawn_blocking(move || provider.run(&line).map(|o| (line, o)))
                        .await
                        .expect("docker exec does not panic")?;
                if !out.1.success {
                    return Err(fail(format!("`{}`: {}", out.0, tail(&out.1.stderr, 5))));
                }
            }
        }
        crate::wait::poll(
            "every node Ready",
            Duration::from_secs(300),
            Duration::from_secs(1),
            || {
                let api = api.clone();
                async move {
                    let Ok(l) = api.list(&Default::default()).await else {
                        return crate::wait::Check::Pending("list nodes".into());
                    };
                    let not_ready: Vec<String> = l
                        .items
                        .iter()
                        .filter(|n| {
                            !n.status
                                .as_ref()
                                .and_then(|s| s.conditions.as_ref())
                                .is_some_and(|c| {
                                    c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                                })
                        })
                        .filter_map(|n| n.metadata.name.clone())
                        .collect();
                    crate::wait::Check::when(not_ready.is_empty(), || {
                        format!("not Ready: {}", not_ready.join(", "))
                    })
                }
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        // A pod that starts before its node's kube-proxy has written the Service rules cannot
        // reach the apiserver by its Service address (a controller then exits and restarts):
        // ready means every node has the rules of the `kubernetes` Service.
        let names: Vec<String> = found.iter().map(|n| n.name.clone()).collect();
        crate::wait::poll(
            "every node's kube-proxy serves the kubernetes Service",
            Duration::from_secs(300),
            Duration::from_secs(1),
            || {
                let (names, provider) = (names.clone(), self.provider.clone());
                async move {
                    let missing = tokio::task::spawn_blocking(move || {
                        names
                            .into_iter()
                            .filter(|node| {
                                let line =
                                    provider.docker(["exec", node, "iptables-save", "-t", "nat"]);
                                !provider.run(&line).is_ok_and(|o| {
                                    o.success && o.stdout.contains(KUBERNETES_SERVICE_RULE)
                                })
                            })
                            .collect::<Vec<_>>()
                    })
                    .await
                    .unwrap_or_default();
                    crate::wait::Check::when(missing.is_empty(), || {
                        format!("no Service rules yet on {}", missing.join(", "))
                    })
                }
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        let provisioner = tokio::spawn(async move {
            if let Err(e) =
                crate::cluster::local::provisioner::run(client, PathBuf::from(OFFLINE_VOLUMES))
                    .await
            {
                tracing::warn!("provisioner: {e:#}");
            }
        });
        self.provisioner = Some(provisioner.abort_handle());
        Ok(())
    }
}

/// A kind cluster the harness created; deleted (logs exported first) when destroyed or
/// dropped.
pub struct KindCluster {
    pub(super) name: String,
    pub(super) dir: PathBuf,
    pub(super) kubeconfig: PathBuf,
    pub(super) plan: KindPlan,
    pub(super) provider: KindProvider,
    pub(super) done: bool,
    /// The volume provisioner of a cluster on an offline image, stopped at teardown.
    pub(super) provisioner: Option<tokio::task::AbortHandle>,
    /// The nodes' image registry ([`registry`]), in the control-plane node.
    pub(super) registry: Option<std::net::SocketAddr>,
}

impl std::fmt::Debug for KindCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindCluster")
            .field("name", &self.name)
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

impl KindCluster {
    /// The commands this cluster was made with and will be removed with.
    pub fn plan(&self) -> &KindPlan {
        &self.plan
    }

    /// The environment a `docker` command needs to reach the daemon the cluster's nodes run
    /// in (`DOCKER_HOST` of a private daemon; nothing for the user's default one).
    pub fn docker_env(&self) -> Vec<(String, String)> {
        self.provider.env()
    }

    /// Loads an image archive (docker or OCI) into every node, as `kind load image-archive`.
    pub fn load_image_archive(&self, archive: &Path) -> Result<(), KindError> {
        let cmd = CommandLine {
            program: self.plan.create.program.clone(),
            args: vec![
                "load".into(),
                "image-archive".into(),
                archive.display().to_string(),
                "--name".into(),
                self.name.clone(),
            ],
            env: self.provider.env(),
        };
        let out = self.provider.run(&cmd)?;
        match out.success {
            true => Ok(()),
            false => Err(KindError::Command {
                command: cmd.to_string(),
                tail: tail(&out.stderr, 5),
            }),
        }
    }

    /// A client with the cluster's admin kubeconfig.
    pub async fn client(&self) -> Result<kube::Client, crate::cluster::client::KubeconfigError> {
        crate::cluster::admin_client(&self.kubeconfig).await
    }

    fn teardown(&mut self) -> Result<(), KindError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        if let Some(p) = self.provisioner.take() {
            p.abort();
        }
        let mut errors = self
            .provider
            .export_then_delete(&self.plan.export_logs, &self.plan.delete);
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            errors.push(format!("remove {}: {e}", self.dir.display()));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(KindError::Teardown {
                name: self.name.clone(),
                errors,
            })
        }
    }
}

impl Cluster for KindCluster {
    type Error = KindError;

    fn name(&self) -> &str {
        &self.name
    }

    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn export_logs(&self, dest: &Path) -> Result<(), KindError> {
        let mut cmd = self.plan.export_logs.clone();
        cmd.args[2] = dest.display().to_string();
        let out = self.provider.run(&cmd)?;
        if out.success {
            Ok(())
        } else {
            Err(KindError::Command {
                command: cmd.to_string(),
                tail: tail(&out.stderr, 5),
            })
        }
    }

    fn destroy(mut self) -> Result<(), KindError> {
        self.teardown()
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("warning: {e}");
        }
    }
}
