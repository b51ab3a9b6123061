//! kwok's part of a local cluster: the stages that drive fake nodes and pods and the rules that
//! answer `kubectl exec` and `kubectl logs` ([`config`]), and the Node objects it plays the
//! kubelet for ([`node`]).
//!
//! A pod on a kwok node has no containers, so there is nothing to exec into and no output to
//! read. kwok's server is the nodes' kubelet endpoint, and it answers both anyway:
//!
//! - `kubectl exec` runs the command *on the host*, as `nobody` (uid and gid 65534), in the
//!   cluster's scratch directory [`Layout::kwok_exec_dir`] (owned by `nobody`, removed with the
//!   cluster), with only `PATH` and [`EXEC_ENV`] set beyond kwok's own empty-by-design
//!   environment. It exists so suites that exec into pods (OpenKruise's e2e tests do) get an
//!   answer; it is not a container and must not be treated as one.
//! - `kubectl logs` serves one file, [`Layout::kwok_pod_log`], whose single line says that the
//!   pod runs on a kwok fake node and has no container output.
//!
//! kwok changes directory after it drops to `nobody`, so a rule's `workDir` would need `nobody`
//! to traverse every parent of the cluster directory (`/root` is closed). Instead kwok itself
//! runs in the scratch directory and exec'd commands inherit it (see
//! [`super::components::kwok`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::ObjectMeta;
use serde_json::json;

use super::components::{KWOK_NODE_LABEL, Layout};
use crate::cluster::{NodeSpec, PodTiming};

/// The stage set: node init + heartbeat, pod ready / in-place image update / complete / stop /
/// delete, with `@...@` placeholders for the profile's [`PodTiming`] (see [`stages`]).
pub const STAGES: &str = include_str!("assets/kwok-stages.yaml");

/// [`STAGES`] with `timing` filled in.
pub fn stages(timing: &PodTiming) -> String {
    let restart = timing.in_place_restart_ms;
    STAGES
        .replace("@IN_PLACE_MS@", &restart.to_string())
        .replace("@IN_PLACE_JITTER_MS@", &(restart + restart / 2).to_string())
        .replace(
            "@STOP_SECONDS@",
            &format!("{}", timing.stop_ms as f64 / 1000.0),
        )
}

/// The user and group `kubectl exec` runs commands as on kwok nodes: `nobody`.
pub const EXEC_UID: u32 = 65534;

/// The environment a command run by `kubectl exec` on a kwok node gets on top of kwok's.
pub const EXEC_ENV: &[(&str, &str)] = &[("HARNESS_FAKE_POD", "true")];

/// The line `kubectl logs` prints for every container of a pod on a kwok node.
pub const POD_LOG_LINE: &str =
    "harness: this pod runs on a kwok fake node; it has no containers and no output";

/// The kwok configuration file: the stages (with `timing`), then the exec and logs rules for
/// every pod (as JSON documents, which are YAML too).
pub fn config(layout: &Layout, timing: &PodTiming) -> String {
    let stages = stages(timing);
    let envs: Vec<serde_json::Value> = EXEC_ENV
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let exec = json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterExec",
        "metadata": {"name": "harness-exec"},
        "spec": {"execs": [{"local": {
            "envs": envs,
            "securityContext": {"runAsUser": EXEC_UID, "runAsGroup": EXEC_UID},
        }}]},
    });
    let logs = json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "harness-logs"},
        "spec": {"logs": [{"logsFile": layout.kwok_pod_log()}]},
    });
    format!(
        "{stages}---\n\
         # `kubectl exec` on any pod of a kwok node: the command runs on the host as nobody, in\n\
         # kwok's own working directory (no workDir: see the module docs of `cluster::local::kwok`).\n\
         {exec:#}\n---\n\
         # `kubectl logs` on any pod of a kwok node: one line saying there is no output.\n\
         {logs:#}\n"
    )
}

/// The content of [`Layout::kwok_pod_log`]: [`POD_LOG_LINE`] in the CRI log format kwok reads
/// (`<RFC 3339 time> stdout F <text>`), stamped `at`.
pub fn pod_log(at: time::OffsetDateTime) -> String {
    let stamp = at
        .to_offset(time::UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into());
    format!("{stamp} stdout F {POD_LOG_LINE}\n")
}

/// The Node object for `spec`: its labels plus the kwok selector label, hostname, OS and arch.
pub fn node(spec: &NodeSpec) -> Node {
    let mut labels: BTreeMap<String, String> = spec.labels.clone();
    labels.insert(KWOK_NODE_LABEL.0.into(), KWOK_NODE_LABEL.1.into());
    labels.insert("kubernetes.io/hostname".into(), spec.name.clone());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    Node {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                ("kwok.x-k8s.io/node".to_string(), "fake".to_string()),
                ("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string()),
            ])),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_parse_as_yaml_documents_with_unique_names() {
        let mut names = vec![];
        for doc in stages(&PodTiming::default()).split("\n---\n") {
            let v: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
            assert_eq!(v["kind"], "Stage");
            names.push(v["metadata"]["name"].as_str().unwrap().to_string());
        }
        let before = names.len();
        names.sort();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(names.contains(&"harness-pod-inplace-image-update".to_string()));
    }

    fn documents(layout: &Layout) -> Vec<serde_json::Value> {
        config(layout, &PodTiming::default())
            .split("\n---\n")
            .map(|doc| serde_saphyr::from_str(doc).unwrap())
            .collect()
    }

    #[test]
    fn exec_runs_as_nobody_with_a_small_env_and_logs_serve_the_cluster_file() {
        let layout = Layout::new("/clusters/c");
        let docs = documents(&layout);
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds[kinds.len() - 2..], ["ClusterExec", "ClusterLogs"]);
        let exec = &docs[docs.len() - 2]["spec"]["execs"];
        assert_eq!(exec.as_array().unwrap().len(), 1, "one rule for every pod");
        let local = &exec[0]["local"];
        assert_eq!(local["securityContext"]["runAsUser"], 65534);
        assert_eq!(local["securityContext"]["runAsGroup"], 65534);
        assert_eq!(
            local["envs"],
            serde_json::json!([{"name": "HARNESS_FAKE_POD", "value": "true"}])
        );
        // The work dir is kwok's own (see the module docs), not a rule's.
        assert!(local.get("workDir").is_none());
        let logs = &docs[docs.len() - 1]["spec"]["logs"];
        assert_eq!(logs[0]["logsFile"], "/clusters/c/kwok-pod.log");
        assert!(logs[0].get("follow").is_none());
    }

    #[test]
    fn node_init_advertises_kwoks_server_as_the_kubelet_endpoint() {
        let docs = documents(&Layout::new("/c"));
        let init = docs
            .iter()
            .find(|d| d["metadata"]["name"] == "harness-node-init")
            .unwrap();
        let template = init["spec"]["next"]["statusTemplate"].as_str().unwrap();
        assert!(
            template.contains(
                "{{ with NodePort }}\ndaemonEndpoints:\n  kubeletEndpoint:\n    Port: {{ . }}\n{{ end }}"
            ),
            "{template}"
        );
    }

    #[test]
    fn the_pod_log_is_one_cri_line() {
        let at = time::macros::datetime!(2025-01-02 03:04:05 UTC);
        assert_eq!(
            pod_log(at),
            format!("2025-01-02T03:04:05Z stdout F {POD_LOG_LINE}\n")
        );
    }
}
