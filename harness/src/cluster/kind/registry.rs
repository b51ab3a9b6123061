//! The image registry of a kind cluster on an offline node image: the registry the harness
//! builds, run inside the control-plane node on the nodes' private Docker network (no host
//! port), and every node's containerd told to pull any host's images from it
//! ([`mirror_patch`]). Kind's nodes can pull nothing else here, and a kubelet pulls even an
//! image it has when a pod says `imagePullPolicy: Always` — which OpenKruise's workloads
//! default to (for in-place updates) — so loading images into the nodes is not enough: they
//! are pushed to this registry, as the local provider's real nodes pull from theirs.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::{KindCluster, KindError, tail};
use crate::cluster::local::registry::{RegistryClient, push_with};
use crate::toolchain::BuiltImage;

/// The registry's port inside the control-plane node.
pub const PORT: u16 = 5000;

/// Where the registry binary goes in the node.
const BINARY: &str = "/usr/local/bin/harness-registry";

/// Its configuration file in the node.
const CONFIG: &str = "/etc/harness-registry.yml";

/// The control-plane node's container name (kind's naming): the registry's host name on the
/// nodes' network.
pub fn host(cluster: &str) -> String {
    format!("{cluster}-control-plane")
}

/// The containerd configuration patch (kind's `containerdConfigPatches`) that makes the
/// registry in `cluster`'s control-plane node the mirror of every host (`*`), over plain HTTP
/// on the nodes' private network.
pub fn mirror_patch(cluster: &str) -> String {
    format!(
        "[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"*\"]\n  endpoint = \
         [\"http://{}:{PORT}\"]\n",
        host(cluster)
    )
}

/// The registry's configuration: every address of the node (the node's own network
/// namespace, on the private Docker network), filesystem storage in the node, no access log.
pub fn config_yaml() -> String {
    format!(
        "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\n\
         storage:\n  filesystem:\n    rootdirectory: /var/lib/harness-registry\n  delete:\n    \
         enabled: true\nhttp:\n  addr: 0.0.0.0:{PORT}\n"
    )
}

impl KindCluster {
    /// Copies the registry binary into the control-plane node, starts it there (it goes with
    /// the node) and waits until it answers from the host; returns its address.
    pub(super) async fn start_registry(&self, binary: &Path) -> Result<SocketAddr, KindError> {
        let node = host(&self.name);
        let docker = |args: &[&str]| self.provider.docker(args);
        let config = format!("printf '%s' '{}' > {CONFIG}", config_yaml());
        let binary = binary.display().to_string();
        let steps = vec![
            docker(&["cp", &binary, &format!("{node}:{BINARY}")]),
            docker(&["exec", &node, "sh", "-c", &config]),
            docker(&[
                "exec",
                "-d",
                "-e",
                "OTEL_TRACES_EXPORTER=none",
                &node,
                BINARY,
                "serve",
                CONFIG,
            ]),
            docker(&[
                "inspect",
                "-f",
                "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
                &node,
            ]),
        ];
        let provider = self.provider.clone();
        let outputs = tokio::task::spawn_blocking(move || {
            let mut outs = vec![];
            for cmd in steps {
                let out = provider.run(&cmd)?;
                if !out.success {
                    return Err(KindError::Command {
                        command: cmd.to_string(),
                        tail: tail(&out.stderr, 5),
                    });
                }
                outs.push(out.stdout);
            }
            Ok(outs)
        })
        .await
        .expect("docker commands do not panic")?;
        let fail = |detail: String| KindError::Network {
            name: self.name.clone(),
            detail,
        };
        let ip = outputs
            .last()
            .and_then(|o| o.split_whitespace().next())
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
            .ok_or_else(|| fail(format!("no IP address for node {node}: {outputs:?}")))?;
        let addr = SocketAddr::new(ip, PORT);
        let client = RegistryClient::plain(addr);
        crate::wait::poll(
            "the nodes' image registry answers",
            Duration::from_secs(60),
            Duration::from_millis(250),
            || {
                let client = client.clone();
                async move {
                    match client.ping().await {
                        Ok(()) => crate::wait::Check::Met,
                        Err(e) => crate::wait::Check::Pending(e.to_string()),
                    }
                }
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        Ok(addr)
    }

    /// Whether the cluster's nodes pull from a registry of the harness.
    pub fn has_registry(&self) -> bool {
        self.registry.is_some()
    }

    /// Pushes `images` to the cluster's registry (by repository path and tag, which is how
    /// the nodes ask for any host's images); an error for a cluster without one (not on the
    /// offline node image the harness assembles).
    pub async fn push_images(&self, images: &[BuiltImage]) -> Result<(), KindError> {
        let Some(addr) = self.registry else {
            return Err(KindError::Network {
                name: self.name.clone(),
                detail: "this cluster has no image registry of the harness (only clusters on \
                         the node image it assembles, --kind-offline, have one)"
                    .into(),
            });
        };
        push_with(&RegistryClient::plain(addr), images)
            .await
            .map_err(|e| KindError::Network {
                name: self.name.clone(),
                detail: format!("push images to the nodes' registry at {addr}: {e}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_of_every_host_is_the_control_plane_node() {
        assert_eq!(
            mirror_patch("c1"),
            "[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"*\"]\n  endpoint = \
             [\"http://c1-control-plane:5000\"]\n"
        );
        assert!(
            !config_yaml().contains('\''),
            "the config goes in single quotes"
        );
    }
}
