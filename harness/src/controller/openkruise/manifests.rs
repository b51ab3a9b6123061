//! The release's manifests: its `config/default` rendered with `kubectl kustomize`
//! ([`render`]), its CRDs ([`crds_in`]), and the in-cluster form with the manager Deployment on
//! the release image and the feature gates asked for ([`in_cluster_manifests`]).

use super::*;

/// Renders the release's `config/default` (from the module cache) with `kubectl kustomize`.
pub async fn render(kubectl: &Path, tag: &str) -> Result<Vec<Value>, ControllerError> {
    let go = GoEnv::detect().await?;
    let scratch = tempfile::tempdir().map_err(|e| ControllerError::io(Path::new("tmp"), e))?;
    let files = go.download(scratch.path(), MODULE, tag, true).await?;
    render_dir(kubectl, &files.dir).await
}

/// [`render`] for what `options` names: a checkout's own `config/default`, or the release's.
pub async fn render_for(
    kubectl: &Path,
    tag: &str,
    options: &InstallOptions,
) -> Result<Vec<Value>, ControllerError> {
    match &options.checkout {
        Some(dir) => render_dir(kubectl, dir).await,
        None => render(kubectl, tag).await,
    }
}

/// The CRDs of a source tree: every document of `<root>/config/crd/bases/*.yaml`, by file
/// name.
pub fn crds_in(root: &Path) -> Result<Vec<Value>, ControllerError> {
    let dir = root.join("config/crd/bases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| ControllerError::io(&dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| ControllerError::io(&f, e))?;
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).map_err(|e| ControllerError::Render {
                dir: f.clone(),
                detail: e.to_string(),
            })?;
        out.extend(
            docs.into_iter()
                .filter(|d| d["kind"] == "CustomResourceDefinition"),
        );
    }
    Ok(out)
}

/// Renders `<root>/config/default` with `kubectl kustomize`.
pub async fn render_dir(kubectl: &Path, root: &Path) -> Result<Vec<Value>, ControllerError> {
    let config = root.join("config/default");
    let out = tokio::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(&config)
        .output()
        .await
        .map_err(|e| ControllerError::io(kubectl, e))?;
    if !out.status.success() {
        return Err(ControllerError::Render {
            dir: config,
            detail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| ControllerError::Render {
            dir: config.clone(),
            detail: e.to_string(),
        })?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

/// The release's manager image (kind and k3s nodes pull it).
pub fn manager_image(tag: &str) -> String {
    format!("openkruise/kruise-manager:{tag}")
}

/// The release image as the release's Dockerfile lays it out, from binaries built here: the
/// manager at `/manager` (the entrypoint), the node daemon at `/kruise-daemon`, `/tmp` and
/// `/log` writable by the unprivileged user the manifests run as, and a passwd and group
/// file naming only root and nobody. Named as a runtime stores [`manager_image`].
pub fn release_image(tag: &str, manager: Vec<u8>, daemon: Vec<u8>) -> ImageRecipe {
    use crate::toolchain::oci::{Entry, ImageConfig};
    let file = |path: &str, mode: u32, data: Vec<u8>| Entry::File {
        path: path.into(),
        mode,
        data,
    };
    let dir = |path: &str, mode: u32| Entry::Dir {
        path: path.into(),
        mode,
    };
    let (repo, tag) = manager_image(tag)
        .rsplit_once(':')
        .map(|(r, t)| (r.to_string(), t.to_string()))
        .expect("the image has a tag");
    ImageRecipe {
        name: ImageName {
            host: "docker.io".into(),
            repo,
            tag,
        },
        config: ImageConfig {
            entrypoint: vec!["/manager".into()],
            working_dir: "/".into(),
            ..ImageConfig::default()
        },
        entries: vec![
            file("/manager", 0o755, manager),
            file("/kruise-daemon", 0o755, daemon),
            dir("/tmp", 0o1777),
            dir("/log", 0o1777),
            dir("/etc", 0o755),
            file(
                "/etc/passwd",
                0o644,
                b"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n"
                    .to_vec(),
            ),
            file(
                "/etc/group",
                0o644,
                b"root:x:0:root\nnobody:x:65534:\n".to_vec(),
            ),
        ],
    }
}

/// The feature gates the manager gets on a cluster without real nodes (every in-cluster
/// install too): `KruiseDaemon=false` plus `gates`.
pub fn manager_gates(gates: &BTreeMap<String, bool>) -> BTreeMap<String, bool> {
    manager_gates_for(gates, false)
}

/// The feature gates of the manager (and its node daemons): `KruiseDaemon=<with_daemon>` —
/// true only where real nodes run a daemon, since kwok nodes have none — plus `gates`.
pub fn manager_gates_for(
    gates: &BTreeMap<String, bool>,
    with_daemon: bool,
) -> BTreeMap<String, bool> {
    let mut all = gates.clone();
    all.insert("KruiseDaemon".to_string(), with_daemon);
    all
}

/// `--feature-gates=A=true,B=false`, the same on every provider.
pub fn gate_arg(gates: &BTreeMap<String, bool>) -> String {
    format!(
        "--feature-gates={}",
        gates
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// The release's manifests for a cluster with real nodes (kind, k3s): the manager Deployment
/// and, with `KruiseDaemon=true` in `gates`, the kruise-daemon DaemonSet, both on the release
/// image with the same gates as on the local provider (their own `--feature-gates`
/// replaced); with `KruiseDaemon=false` the DaemonSet is left out.
pub fn in_cluster_manifests(
    mut docs: Vec<Value>,
    tag: &str,
    gates: &BTreeMap<String, bool>,
) -> Vec<Value> {
    let with_daemon = gates.get("KruiseDaemon").copied().unwrap_or(false);
    if !with_daemon {
        docs.retain(|d| kind(d) != "DaemonSet");
    }
    for d in docs
        .iter_mut()
        .filter(|d| matches!(kind(d), "Deployment" | "DaemonSet"))
    {
        let own = if kind(d) == "Deployment" {
            "manager"
        } else {
            "daemon"
        };
        if let Some(containers) = d["spec"]["template"]["spec"]["containers"].as_array_mut() {
            for c in containers.iter_mut().filter(|c| c["name"] == own) {
                c["image"] = json!(manager_image(tag));
                c["imagePullPolicy"] = json!("IfNotPresent");
                let mut args: Vec<Value> = c["args"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|a| {
                        !a.as_str()
                            .unwrap_or_default()
                            .starts_with("--feature-gates")
                    })
                    .collect();
                args.push(json!(gate_arg(gates)));
                c["args"] = json!(args);
            }
        }
    }
    docs
}
