//! What a kind config needs to run the node image: [`kind_config_additions`], as data the kind
//! provider merges into the config it generates ([`KindConfigAdditions::merge_into`]).

use serde_json::{Value, json};

use super::super::images::{IMAGE_HOST, PAUSE_IMAGE};

/// What a kind config needs to run the node image, as data the kind provider merges into its
/// config ([`KindConfigAdditions::merge_into`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindConfigAdditions {
    /// `networking.disableDefaultCNI`: the image has no `default-cni.yaml` (no kindnetd); the
    /// provider configures a bridge CNI on each node after create.
    pub disable_default_cni: bool,
    /// `kubeadmConfigPatches`: every image from `harness.local` (static pods, kube-proxy,
    /// CoreDNS, kubelet's pause), and preflight skipped, as kind does (it would pull).
    pub kubeadm_config_patches: Vec<String>,
    /// `containerdConfigPatches`: the harness's pause image as the sandbox image, and
    /// `restrict_oom_score_adj` (a node container here may not lower OOM scores); both are in
    /// the image's `config.toml` too.
    pub containerd_config_patches: Vec<String>,
}

/// The kind config additions of the node image (containerd 1.6's CRI section).
pub fn kind_config_additions() -> KindConfigAdditions {
    KindConfigAdditions {
        disable_default_cni: true,
        kubeadm_config_patches: vec![
            format!("kind: ClusterConfiguration\nimageRepository: {IMAGE_HOST}\n"),
            "kind: InitConfiguration\nskipPhases:\n- preflight\n".into(),
            "kind: JoinConfiguration\nskipPhases:\n- preflight\n".into(),
        ],
        containerd_config_patches: vec![format!(
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n  sandbox_image = \"{PAUSE_IMAGE}\"\n"
        )],
    }
}

impl KindConfigAdditions {
    /// Adds these to a kind config (a `kind: Cluster` object): `networking` gets the flag, the
    /// patch lists are appended to (and made if missing).
    pub fn merge_into(&self, config: &mut Value) {
        if self.disable_default_cni {
            let networking = &mut config["networking"];
            if !networking.is_object() {
                *networking = json!({});
            }
            networking["disableDefaultCNI"] = json!(true);
        }
        for (field, patches) in [
            ("kubeadmConfigPatches", &self.kubeadm_config_patches),
            ("containerdConfigPatches", &self.containerd_config_patches),
        ] {
            let list = &mut config[field];
            if !list.is_array() {
                *list = json!([]);
            }
            let list = list.as_array_mut().expect("made an array");
            list.extend(patches.iter().map(|p| json!(p)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_additions_merge_into_a_kind_config() {
        let mut config = json!({
            "kind": "Cluster",
            "networking": {"apiServerAddress": "127.0.0.1"},
            "kubeadmConfigPatches": ["kind: KubeletConfiguration\nfoo: bar\n"],
        });
        let additions = kind_config_additions();
        additions.merge_into(&mut config);
        assert_eq!(config["networking"]["apiServerAddress"], "127.0.0.1");
        assert_eq!(config["networking"]["disableDefaultCNI"], true);
        let patches = config["kubeadmConfigPatches"].as_array().unwrap();
        assert_eq!(patches.len(), 4, "appended to what was there");
        assert_eq!(patches[0], "kind: KubeletConfiguration\nfoo: bar\n");
        assert_eq!(
            patches[1],
            "kind: ClusterConfiguration\nimageRepository: harness.local\n"
        );
        assert!(
            patches[2]
                .as_str()
                .unwrap()
                .contains("skipPhases:\n- preflight\n")
        );
        let containerd = config["containerdConfigPatches"].as_array().unwrap();
        assert_eq!(containerd.len(), 1);
        let text = containerd[0].as_str().unwrap();
        assert!(text.starts_with("[plugins.\"io.containerd.grpc.v1.cri\"]\n"));
        assert!(text.contains("restrict_oom_score_adj = true"));
        assert!(text.contains("sandbox_image = \"harness.local/pause:3.10\""));
        // Into an empty config too.
        let mut empty = json!({});
        additions.merge_into(&mut empty);
        assert_eq!(empty["networking"]["disableDefaultCNI"], true);
        assert_eq!(empty["kubeadmConfigPatches"].as_array().unwrap().len(), 3);
    }
}
