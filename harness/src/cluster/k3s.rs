//! The k3s provider: a single-node k3s in a container through testcontainers, for hosts with
//! Docker. The container runs only with the `k3s` cargo feature ([`K3sProvider`]); what it
//! would run ([`image`], [`args`]) is plain data, shown by `cluster up --dry-run`.
//!
//! k3s is the light tier: one node, carrying the labels of the profile's first node, so
//! scenarios that spread over zones need the local or kind provider.

use super::Profile;
use crate::toolchain::KubeVersion;

/// The k3s image (repository and tag) for a Kubernetes version.
pub fn image(version: KubeVersion) -> (&'static str, String) {
    ("rancher/k3s", format!("{}-k3s1", version.tag()))
}

fn gates(profile: &Profile) -> Option<String> {
    (!profile.feature_gates.is_empty()).then(|| {
        profile
            .feature_gates
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The k3s server arguments for `profile`: the feature gates for every component (the
/// kubelet included), the runtime-config, and the first node's labels.
pub fn args(profile: &Profile) -> Vec<String> {
    let mut a = vec![
        "server".to_string(),
        "--snapshotter=native".into(),
        "--disable=traefik".into(),
    ];
    if let Some(g) = gates(profile) {
        for component in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kubelet",
        ] {
            a.push(format!("--{component}-arg=feature-gates={g}"));
        }
    }
    if !profile.runtime_config.is_empty() {
        let rc = profile
            .runtime_config
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        a.push(format!("--kube-apiserver-arg=runtime-config={rc}"));
    }
    if let Some(n) = profile.nodes.first() {
        for (k, v) in &n.labels {
            a.push(format!("--node-label={k}={v}"));
        }
    }
    a
}

/// What the k3s provider would start, for a dry run.
pub fn dry_run(profile: &Profile) -> String {
    let (repo, tag) = image(profile.kubernetes);
    let mut out =
        format!("container {repo}:{tag} (privileged), API port 6443 mapped to a free host port\n");
    for a in args(profile) {
        out.push_str(&format!("  {a}\n"));
    }
    out
}

#[cfg(feature = "k3s")]
pub use container::{K3sCluster, K3sError, K3sProvider};

#[cfg(feature = "k3s")]
mod container {
    use std::path::{Path, PathBuf};

    use testcontainers_modules::k3s::{K3s, KUBE_SECURE_PORT};
    use testcontainers_modules::testcontainers::runners::SyncRunner;
    use testcontainers_modules::testcontainers::{Container, ImageExt};

    use super::super::{Cluster, ClusterProvider, Profile};

    /// Errors of the k3s provider.
    #[derive(Debug, thiserror::Error)]
    pub enum K3sError {
        /// The container did not start.
        #[error("start k3s {tag}: {detail} (is Docker running?)")]
        Start {
            /// Image tag.
            tag: String,
            /// Cause.
            detail: String,
        },
        /// A file operation failed.
        #[error("access {}: {source}", path.display())]
        Io {
            /// Path.
            path: PathBuf,
            /// Cause.
            source: std::io::Error,
        },
    }

    /// Starts k3s containers; each cluster keeps its files under `root/<name>`.
    #[derive(Debug, Clone)]
    pub struct K3sProvider {
        /// Where cluster directories go.
        pub root: PathBuf,
    }

    /// A k3s container; removed (with its directory) when destroyed or dropped.
    pub struct K3sCluster {
        name: String,
        dir: PathBuf,
        kubeconfig: PathBuf,
        container: Option<Container<K3s>>,
    }

    impl std::fmt::Debug for K3sCluster {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("K3sCluster")
                .field("name", &self.name)
                .finish()
        }
    }

    impl ClusterProvider for K3sProvider {
        type Cluster = K3sCluster;
        type Error = K3sError;

        async fn create(&self, name: &str, profile: &Profile) -> Result<K3sCluster, K3sError> {
            let dir = self.root.join(name);
            let conf = dir.join("conf");
            std::fs::create_dir_all(&conf).map_err(|source| K3sError::Io {
                path: conf.clone(),
                source,
            })?;
            let (_, tag) = super::image(profile.kubernetes);
            let args = super::args(profile);
            let name = name.to_string();
            tokio::task::spawn_blocking(move || {
                let fail = |detail: String| K3sError::Start {
                    tag: tag.clone(),
                    detail,
                };
                let container = K3s::default()
                    .with_conf_mount(&conf)
                    .with_tag(tag.clone())
                    .with_cmd(args)
                    .with_privileged(true)
                    .with_userns_mode("host")
                    .start()
                    .map_err(|e| fail(e.to_string()))?;
                let port = container
                    .get_host_port_ipv4(KUBE_SECURE_PORT)
                    .map_err(|e| fail(e.to_string()))?;
                let text = container
                    .image()
                    .read_kube_config()
                    .map_err(|e| fail(e.to_string()))?
                    .replace(
                        "https://127.0.0.1:6443",
                        &format!("https://127.0.0.1:{port}"),
                    );
                let kubeconfig = dir.join("kubeconfig");
                std::fs::write(&kubeconfig, text).map_err(|source| K3sError::Io {
                    path: kubeconfig.clone(),
                    source,
                })?;
                Ok(K3sCluster {
                    name,
                    dir,
                    kubeconfig,
                    container: Some(container),
                })
            })
            .await
            .expect("k3s start does not panic")
        }
    }

    impl K3sCluster {
        fn teardown(&mut self) {
            // Dropping the container stops and removes it.
            self.container.take();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    impl Cluster for K3sCluster {
        type Error = K3sError;

        fn name(&self) -> &str {
            &self.name
        }

        fn kubeconfig(&self) -> &Path {
            &self.kubeconfig
        }

        fn export_logs(&self, dest: &Path) -> Result<(), K3sError> {
            let io = |source| K3sError::Io {
                path: dest.to_path_buf(),
                source,
            };
            std::fs::create_dir_all(dest).map_err(io)?;
            if let Some(c) = &self.container {
                let out = c.stdout_to_vec().unwrap_or_default();
                let err = c.stderr_to_vec().unwrap_or_default();
                std::fs::write(dest.join("k3s.stdout.log"), out).map_err(io)?;
                std::fs::write(dest.join("k3s.stderr.log"), err).map_err(io)?;
            }
            Ok(())
        }

        fn destroy(mut self) -> Result<(), K3sError> {
            self.teardown();
            Ok(())
        }
    }

    impl Drop for K3sCluster {
        fn drop(&mut self) {
            self.teardown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_go_to_every_component_and_the_kubelet() {
        let mut p = Profile::new(KubeVersion::default_version());
        p.add_gates(&["InPlacePodVerticalScaling=true"]).unwrap();
        let a = args(&p);
        assert!(a.contains(&"--kubelet-arg=feature-gates=InPlacePodVerticalScaling=true".into()));
        assert!(a.contains(&"--node-label=topology.kubernetes.io/zone=zone-a".into()));
        assert_eq!(image(p.kubernetes).1, "v1.32.5-k3s1");
    }
}
