//! OpenKruise's own end-to-end suite (`test/e2e` of the release module, Ginkgo specs): built
//! as a test binary from the same module graph as the manager, cached by release. Start with
//! [`build`]. What upstream's CI gives the suite beside the cluster is here too:
//! [`E2E_CONFIG`], the objects it creates before the manager starts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;

use super::MODULE;
use crate::controller::{CiGates, ControllerRef, E2eSuite};
use crate::toolchain::go::GoEnv;
use crate::toolchain::images::Reference;
use crate::toolchain::{Toolchain, ToolchainError};
use futures::future::BoxFuture;

/// The suite's package in the release module (the same path from v1.5.0 to v1.9.x).
pub const PACKAGE: &str = "github.com/openkruise/kruise/test/e2e";
/// The test binary's name in the cache.
pub const BINARY: &str = "kruise-e2e.test";
/// The file of the release module upstream's CI applies before it installs the manager (the
/// `kruise-configuration` ConfigMap: the WorkloadSpread custom-workload whitelist its specs
/// use); the harness seeds it ([`crate::cluster::Profile::objects`]).
pub const E2E_CONFIG: &str = "test/kruise-e2e-config.yaml";

/// Builds (or finds) the suite of release `tag` (a cold build takes minutes: the suite
/// compiles much of Kubernetes' e2e framework).
pub async fn build(toolchain: &Toolchain, tag: &str) -> Result<PathBuf, ToolchainError> {
    toolchain
        .module_test(MODULE, PACKAGE, tag, BINARY, true)
        .await
}

/// The module of the `ginkgo` command, which runs a suite in parallel processes.
pub const GINKGO_MODULE: &str = "github.com/onsi/ginkgo/v2";

/// The `ginkgo` command at the version the suite of `reference` is built with (its `go.mod`),
/// built from the module proxy and cached.
pub async fn ginkgo_cli(
    toolchain: &Toolchain,
    reference: &ControllerRef,
) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    let go_mod = module_dir(reference).await?.join("go.mod");
    let text =
        std::fs::read_to_string(&go_mod).with_context(|| format!("read {}", go_mod.display()))?;
    let version = required_version(&text, GINKGO_MODULE).with_context(|| {
        format!(
            "the suite of {reference} does not require {GINKGO_MODULE}: it is no Ginkgo v2 suite"
        )
    })?;
    Ok(toolchain
        .module_package(
            GINKGO_MODULE,
            &format!("{GINKGO_MODULE}/ginkgo"),
            &version,
            "ginkgo",
            false,
        )
        .await?)
}

/// The suite of `reference`: releases and commits from the module proxy; a checkout is refused
/// (its suite is built with `go test -c ./test/e2e` in the checkout).
pub async fn build_ref(
    toolchain: &Toolchain,
    reference: &ControllerRef,
) -> anyhow::Result<PathBuf> {
    match &reference.checkout {
        Some(dir) => anyhow::bail!(
            "the harness builds the upstream e2e suite of releases and commits only; for the \
             checkout {} build it there with `go test -c ./test/e2e`",
            dir.display()
        ),
        None => Ok(build(toolchain, &reference.version).await?),
    }
}

/// The suite of a release as an [`E2eSuite`].
#[derive(Debug, Clone)]
pub struct Suite {
    reference: ControllerRef,
}

impl Suite {
    /// The suite of `reference`.
    pub fn of(reference: &ControllerRef) -> Self {
        Self {
            reference: reference.clone(),
        }
    }
}

impl E2eSuite for Suite {
    fn reference(&self) -> &ControllerRef {
        &self.reference
    }

    fn build<'a>(&'a self, toolchain: &'a Toolchain) -> BoxFuture<'a, anyhow::Result<PathBuf>> {
        Box::pin(build_ref(toolchain, &self.reference))
    }

    fn ginkgo<'a>(&'a self, toolchain: &'a Toolchain) -> BoxFuture<'a, anyhow::Result<PathBuf>> {
        Box::pin(ginkgo_cli(toolchain, &self.reference))
    }

    fn images(&self) -> BoxFuture<'_, anyhow::Result<Vec<Reference>>> {
        Box::pin(image_references(&self.reference))
    }

    fn seed_objects(&self) -> BoxFuture<'_, anyhow::Result<Vec<serde_json::Value>>> {
        Box::pin(async move {
            let mut objects = config_objects(&self.reference).await?;
            objects.extend(csi_storage_classes(&self.reference).await?);
            Ok(objects)
        })
    }

    fn before_suite(&self) -> BoxFuture<'_, anyhow::Result<Vec<serde_json::Value>>> {
        Box::pin(script_objects(&self.reference))
    }

    fn ci_gates<'a>(
        &'a self,
        manager: &'a ControllerRef,
    ) -> BoxFuture<'a, anyhow::Result<CiGates>> {
        Box::pin(ci_gates(manager, &self.reference))
    }
}

/// The objects of [`E2E_CONFIG`] in the suite's release module (downloaded into the Go module
/// cache if needed); none for a release that has no such file.
pub async fn config_objects(reference: &ControllerRef) -> anyhow::Result<Vec<serde_json::Value>> {
    let file = module_dir(reference).await?.join(E2E_CONFIG);
    if !file.exists() {
        return Ok(vec![]);
    }
    Ok(crate::cluster::seed::load(&[file])?)
}

/// The script upstream's CI runs the suite with; before the suite it applies manifests from
/// other projects' repositories (v1.9.0: kubeflow's TFJob CRD, for a WorkloadSpread spec).
pub const E2E_SCRIPT: &str = "tools/hack/run-kruise-e2e-test.sh";

/// A manifest [`E2E_SCRIPT`] applies from a GitHub repository at a branch or tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptManifest {
    /// The repository as a Go module path (`github.com/<owner>/<repo>`).
    pub module: String,
    /// The branch or tag.
    pub reference: String,
    /// Whether `reference` is a branch (`refs/heads/...`).
    pub branch: bool,
    /// The file in the repository.
    pub path: String,
}

/// The manifests a script applies with `kubectl apply -f <raw file URL>`: the URL's
/// `<owner>/<repo>/refs/{heads,tags}/<ref>/<path>` (or `<owner>/<repo>/<ref>/<path>`, a tag).
pub fn script_manifests(script: &str) -> Vec<ScriptManifest> {
    static APPLY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"kubectl\s+apply\s+-f\s+https://[^/\s]+/([\w.-]+)/([\w.-]+)/(?:refs/(heads|tags)/)?([\w.-]+)/(\S+\.ya?ml)",
        )
        .expect("valid")
    });
    script
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| APPLY.captures_iter(l).collect::<Vec<_>>())
        .map(|c| ScriptManifest {
            module: format!("github.com/{}/{}", &c[1], &c[2]),
            reference: c[4].to_string(),
            branch: c.get(3).is_some_and(|k| k.as_str() == "heads"),
            path: c[5].to_string(),
        })
        .collect()
}

/// The module version that stands for `m`'s reference among `versions` (the proxy's): a tag
/// itself; a release branch (`v1.8-branch`, `release-1.8`) its newest `v1.8.*` tag. Other
/// branches have none (the proxy serves tags only).
pub fn release_for(m: &ScriptManifest, versions: &[String]) -> Option<String> {
    if !m.branch {
        return Some(m.reference.clone());
    }
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(?:release-v?|v)(\d+)\.(\d+)(?:-branch)?$").expect("valid"));
    let c = LINE.captures(&m.reference)?;
    let prefix = format!("v{}.{}.", &c[1], &c[2]);
    versions
        .iter()
        .filter(|v| v.starts_with(&prefix) && !v.contains('-'))
        .max_by_key(|v| v[prefix.len()..].parse::<u64>().unwrap_or_default())
        .cloned()
}

/// The objects [`E2E_SCRIPT`] of the suite's release applies from other repositories, read
/// from those repositories' Go modules ([`release_for`] their branch); a manifest that cannot
/// be had is named in a warning (the specs that use it then fail, saying what is missing).
pub async fn script_objects(reference: &ControllerRef) -> anyhow::Result<Vec<serde_json::Value>> {
    let file = module_dir(reference).await?.join(E2E_SCRIPT);
    let Ok(script) = std::fs::read_to_string(&file) else {
        return Ok(vec![]);
    };
    let go = GoEnv::detect().await?;
    let scratch = tempfile::tempdir()?;
    let mut out = vec![];
    for m in script_manifests(&script) {
        let got = async {
            let versions = go.module_versions(scratch.path(), &m.module).await?;
            let version = release_for(&m, &versions).ok_or_else(|| {
                anyhow::anyhow!(
                    "no release of {} stands for {} (releases: {})",
                    m.module,
                    m.reference,
                    versions.join(", ")
                )
            })?;
            let dir = go
                .download(scratch.path(), &m.module, &version, true)
                .await?
                .dir;
            anyhow::Ok(crate::cluster::seed::load(&[dir.join(&m.path)])?)
        }
        .await;
        match got {
            Ok(objects) => out.extend(objects),
            Err(e) => eprintln!(
                "warning: {E2E_SCRIPT} of {reference} applies {} of {} ({}), which the harness \
                 cannot read: {e:#}",
                m.path, m.module, m.reference
            ),
        }
    }
    Ok(out)
}

/// The script upstream's CI installs its CSI storage with (`make install-csi`): snapshot CRDs
/// and controller, the CSI hostpath driver, and the StorageClasses the VolumeExpansion specs
/// use (`allow-volume-expansion`, `disallow-volume-expansion`).
pub const CSI_SCRIPT: &str = "tools/hack/csi-driver-host-path/install-snapshot.sh";

/// The StorageClasses [`CSI_SCRIPT`] of the suite's release applies (`kubectl apply -f
/// <file>` beside it): the harness's provisioner stands in for their CSI hostpath driver
/// (the driver and the snapshot controller are images the harness cannot have). None for a
/// release without the script.
pub async fn csi_storage_classes(
    reference: &ControllerRef,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let script = module_dir(reference).await?.join(CSI_SCRIPT);
    let Ok(text) = std::fs::read_to_string(&script) else {
        return Ok(vec![]);
    };
    let dir = script.parent().unwrap_or(std::path::Path::new("."));
    let files: Vec<PathBuf> = applied_files(&text)
        .into_iter()
        .map(|f| dir.join(f))
        .filter(|f| f.exists())
        .collect();
    Ok(crate::cluster::seed::load(&files)?
        .into_iter()
        .filter(|o| o["kind"] == "StorageClass")
        .collect())
}

/// The local files a shell script applies (`kubectl apply -f <file>.yaml`), in order.
pub fn applied_files(script: &str) -> Vec<String> {
    static APPLY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*kubectl\s+apply\s+-f\s+([\w./-]+\.ya?ml)\s*$").expect("valid")
    });
    script
        .lines()
        .filter_map(|l| APPLY.captures(l).map(|c| c[1].to_string()))
        .filter(|f| !f.contains("://"))
        .collect()
}

/// Where upstream's CI takes the manager's feature gates from: the `--feature-gates` argument
/// of the `manager` container in this file of the release module (v1.9.0:
/// `AllAlpha=true,AllBeta=true,EnableExternalCerts=false,TemplateNoDefaults=false`).
pub const MANAGER_MANIFEST: &str = "config/manager/manager.yaml";
/// The kind cluster configuration upstream's CI gives its in-place specs (CloneSet,
/// InplaceVPA): its `featureGates` (InPlacePodVerticalScaling, SidecarContainers).
pub const KIND_CONFIG: &str = "test/kind-conf-with-vpa.yaml";

/// The gates upstream's CI gives a cluster whose manager is `manager` and whose suite is
/// `suite`'s, read from the two release modules (a file a release lacks gives no gates).
pub async fn ci_gates(manager: &ControllerRef, suite: &ControllerRef) -> anyhow::Result<CiGates> {
    use anyhow::Context;
    let read = |p: PathBuf| -> anyhow::Result<Option<String>> {
        if !p.exists() {
            return Ok(None);
        }
        Ok(Some(
            std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?,
        ))
    };
    let controller = match read(module_dir(manager).await?.join(MANAGER_MANIFEST))? {
        Some(text) => {
            manager_gates(&text).with_context(|| format!("{MANAGER_MANIFEST} of {manager}"))?
        }
        None => BTreeMap::new(),
    };
    let cluster = match read(module_dir(suite).await?.join(KIND_CONFIG))? {
        Some(text) => kind_gates(&text).with_context(|| format!("{KIND_CONFIG} of {suite}"))?,
        None => BTreeMap::new(),
    };
    Ok(CiGates {
        controller,
        cluster,
    })
}

/// The `--feature-gates` of the `manager` container of a manifest (YAML documents).
pub fn manager_gates(manifest: &str) -> anyhow::Result<BTreeMap<String, bool>> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(manifest).map_err(|e| anyhow::anyhow!("{e}"))?;
    for v in docs {
        let containers = v["spec"]["template"]["spec"]["containers"].as_array();
        for c in containers.into_iter().flatten() {
            if c["name"] != "manager" {
                continue;
            }
            for a in c["args"].as_array().into_iter().flatten() {
                if let Some(list) = a.as_str().and_then(|a| a.strip_prefix("--feature-gates=")) {
                    return Ok(crate::cluster::parse_gates(&[list])?);
                }
            }
        }
    }
    Ok(BTreeMap::new())
}

/// The `featureGates` of a kind cluster configuration.
pub fn kind_gates(config: &str) -> anyhow::Result<BTreeMap<String, bool>> {
    #[derive(serde::Deserialize)]
    struct KindConfig {
        #[serde(rename = "featureGates", default)]
        feature_gates: BTreeMap<String, bool>,
    }
    Ok(serde_saphyr::from_str::<KindConfig>(config)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .feature_gates)
}

/// The suite's release module: the checkout, or the module downloaded into the Go module cache
/// (a no-op when it is there).
async fn module_dir(reference: &ControllerRef) -> anyhow::Result<PathBuf> {
    Ok(match &reference.checkout {
        Some(dir) => dir.clone(),
        None => {
            let go = GoEnv::detect().await?;
            let scratch = tempfile::tempdir()?;
            go.download(scratch.path(), MODULE, &reference.version, true)
                .await?
                .dir
        }
    })
}

/// Where the Kubernetes e2e framework names its images, in the `k8s.io/kubernetes` module.
pub const IMAGE_MANIFEST: &str = "test/utils/image/manifest.go";

/// The images the suite of `reference` runs, as far as its sources say: every string literal
/// of its `test/e2e` that is an image reference by tag (`"nginx:1.14.2"`), and each Kubernetes
/// e2e image it takes from `k8s.io/kubernetes/test/utils/image` (`imageutils.Nginx`), with
/// the registry and version a spec sets on it (`SetRegistry`, `SetVersion`) or else the ones
/// of that module's manifest, at the version the release's `go.mod` requires. The invalid
/// registry's image (for a pull that must fail) is left out. Sorted, without duplicates.
pub async fn image_references(reference: &ControllerRef) -> anyhow::Result<Vec<Reference>> {
    use anyhow::Context;
    let dir = module_dir(reference).await?;
    let mut sources = vec![];
    collect_go_files(&dir.join("test/e2e"), &mut sources)?;
    let texts: Vec<String> = sources
        .iter()
        .map(|p| std::fs::read_to_string(p).with_context(|| format!("read {}", p.display())))
        .collect::<anyhow::Result<_>>()?;
    let mut found: std::collections::BTreeSet<String> = Default::default();
    let mut uses = vec![];
    for t in &texts {
        found.extend(literal_references(t));
        uses.extend(e2e_image_uses(t));
    }
    if !uses.is_empty() {
        let go_mod = std::fs::read_to_string(dir.join("go.mod"))
            .with_context(|| format!("read {}", dir.join("go.mod").display()))?;
        let version = required_version(&go_mod, KUBERNETES_MODULE).with_context(|| {
            format!(
                "the suite uses {KUBERNETES_MODULE}'s images but its go.mod does not require it"
            )
        })?;
        let go = GoEnv::detect().await?;
        let scratch = tempfile::tempdir()?;
        let k8s = go
            .download(scratch.path(), KUBERNETES_MODULE, &version, true)
            .await?
            .dir;
        let manifest = std::fs::read_to_string(k8s.join(IMAGE_MANIFEST))
            .with_context(|| format!("read {}", k8s.join(IMAGE_MANIFEST).display()))?;
        found.extend(manifest_images(&manifest, &uses));
    }
    let mut refs: Vec<Reference> = found.iter().filter_map(|s| Reference::parse(s)).collect();
    refs.sort();
    refs.dedup_by(|a, b| a.path == b.path && a.tag == b.tag);
    Ok(refs)
}

/// The Kubernetes module, whose e2e framework names images.
pub const KUBERNETES_MODULE: &str = "k8s.io/kubernetes";

fn collect_go_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    use anyhow::Context;
    for e in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            collect_go_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "go") {
            out.push(p);
        }
    }
    out.sort();
    Ok(())
}

/// String literals of Go `source` that are image references by tag (`"busybox:1.32"`,
/// `"openkruise/x:v1"`).
pub fn literal_references(source: &str) -> Vec<String> {
    static LITERAL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#""([a-z0-9][a-z0-9._/-]*:[A-Za-z0-9._-]+)""#).expect("valid")
    });
    LITERAL
        .captures_iter(source)
        .map(|c| c[1].to_string())
        .filter(|s| Reference::parse(s).is_some())
        .collect()
}

/// One use of a Kubernetes e2e image in a spec: its id (`Nginx`) and what the spec sets on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct E2eImageUse {
    /// The `imageutils` id.
    pub id: String,
    /// `SetRegistry("...")` of the spec, if any.
    pub registry: Option<String>,
    /// `SetVersion("...")` of the spec, if any.
    pub version: Option<String>,
}

/// The Kubernetes e2e images Go `source` uses: `imageutils.GetE2EImage(imageutils.X)` as the
/// manifest has it, and `imageutils.GetConfig(imageutils.X)` with the `SetRegistry` and
/// `SetVersion` calls before its next `GetE2EImage()`.
pub fn e2e_image_uses(source: &str) -> Vec<E2eImageUse> {
    static CALL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"imageutils\.(GetE2EImage|GetConfig)\(imageutils\.(\w+)\)").expect("valid")
    });
    static SET_REGISTRY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"\.SetRegistry\("([^"]+)"\)"#).expect("valid"));
    static SET_VERSION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"\.SetVersion\("([^"]+)"\)"#).expect("valid"));
    let set = |re: &Regex, text: &str| re.captures(text).map(|c| c[1].to_string());
    CALL.captures_iter(source)
        .map(|c| {
            let id = c[2].to_string();
            if &c[1] == "GetE2EImage" {
                return E2eImageUse {
                    id,
                    registry: None,
                    version: None,
                };
            }
            let after = &source[c.get(0).expect("whole match").end()..];
            let until = after.find("GetE2EImage()").unwrap_or(0);
            let scope = &after[..until];
            E2eImageUse {
                id,
                registry: set(&SET_REGISTRY, scope),
                version: set(&SET_VERSION, scope),
            }
        })
        .collect()
}

/// The references of `uses` by the Kubernetes e2e image `manifest` (`manifest.go`:
/// `configs[Nginx] = Config{list.PromoterE2eRegistry, "nginx", "1.14-4"}` and the registries
/// of `initRegistry`); images of the invalid registry and ids the manifest lacks are left out.
pub fn manifest_images(manifest: &str, uses: &[E2eImageUse]) -> Vec<String> {
    let registry = regex::Regex::new(r#"(?m)^\s*(\w+Registry):\s*"([^"]+)""#).expect("valid");
    let registries: std::collections::BTreeMap<&str, &str> = registry
        .captures_iter(manifest)
        .map(|c| {
            let (k, v) = (c.get(1).expect("key"), c.get(2).expect("value"));
            (k.as_str(), v.as_str())
        })
        .collect();
    let config = regex::Regex::new(
        r#"configs\[(\w+)\]\s*=\s*Config\{list\.(\w+),\s*"([^"]+)",\s*"([^"]+)"\}"#,
    )
    .expect("valid");
    let configs: std::collections::BTreeMap<String, (String, String, String)> = config
        .captures_iter(manifest)
        .map(|c| {
            (
                c[1].to_string(),
                (c[2].to_string(), c[3].to_string(), c[4].to_string()),
            )
        })
        .collect();
    uses.iter()
        .filter_map(|u| {
            let (list, name, version) = configs.get(&u.id)?;
            if list == "InvalidRegistry" {
                return None;
            }
            let reg = match &u.registry {
                Some(r) => r.as_str(),
                None => registries.get(list.as_str())?,
            };
            let version = u.version.as_deref().unwrap_or(version);
            Some(format!("{reg}/{name}:{version}"))
        })
        .collect()
}

/// The version of `module` that `go_mod` builds with: its `replace` to a version if there is
/// one, else its `require`.
pub fn required_version(go_mod: &str, module: &str) -> Option<String> {
    let mut required = None;
    for line in go_mod.lines() {
        let words: Vec<&str> = line
            .split("//")
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .filter(|w| *w != "require" && *w != "replace")
            .collect();
        match words.as_slice() {
            [m, "=>", _, v] if *m == module => return Some(v.to_string()),
            [m, v] if *m == module => required = Some(v.to_string()),
            _ => {}
        }
    }
    required
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_the_e2e_script_applies_are_read_from_their_module_releases() {
        let script = "make ginkgo\necho x\n# kubectl apply -f https://h.example/a/b/refs/heads/main/c.yaml\n\
            kubectl apply -f https://h.example/kubeflow/training-operator/refs/heads/v1.8-branch/manifests/base/crds/kubeflow.org_tfjobs.yaml\n\
            kubectl apply -f https://h.example/o/r/v0.3.0/deploy/crd.yml\n";
        let m = script_manifests(script);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].module, "github.com/kubeflow/training-operator");
        assert_eq!(m[0].reference, "v1.8-branch");
        assert!(m[0].branch);
        assert_eq!(m[0].path, "manifests/base/crds/kubeflow.org_tfjobs.yaml");
        assert_eq!((m[1].reference.as_str(), m[1].branch), ("v0.3.0", false));
        let versions: Vec<String> = [
            "v1.7.0",
            "v1.8.0",
            "v1.8.10",
            "v1.8.2",
            "v1.9.0-rc.0",
            "v1.8.11-rc.1",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(release_for(&m[0], &versions).as_deref(), Some("v1.8.10"));
        assert_eq!(release_for(&m[1], &versions).as_deref(), Some("v0.3.0"));
        let main = ScriptManifest {
            reference: "main".into(),
            ..m[0].clone()
        };
        assert_eq!(release_for(&main, &versions), None);
        let release = ScriptManifest {
            reference: "release-1.7".into(),
            ..m[0].clone()
        };
        assert_eq!(release_for(&release, &versions).as_deref(), Some("v1.7.0"));
        assert_eq!(release_for(&m[0], &[]), None);
    }

    #[test]
    fn the_csi_script_s_local_manifests_are_found() {
        let script = "kubectl apply -f snapshot/a.yaml\n# kubectl apply -f b.yaml\n\
            bash ./csi_driver/deploy-hostpath.sh\nkubectl apply -f allow-expansion-sc.yaml\n\
            kubectl apply -f https://h.example/x.yaml\n";
        assert_eq!(
            applied_files(script),
            ["snapshot/a.yaml", "allow-expansion-sc.yaml"]
        );
    }

    #[test]
    fn upstream_ci_gates_come_from_the_manager_manifest_and_the_kind_config() {
        let manifest = "apiVersion: v1\nkind: Namespace\nmetadata: {name: system}\n---\n\
            apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      \
            containers:\n      - name: manager\n        args:\n        - --v=5\n        \
            - --feature-gates=AllAlpha=true,AllBeta=true,TemplateNoDefaults=false\n";
        let gates = manager_gates(manifest).unwrap();
        assert_eq!(
            gates,
            BTreeMap::from([
                ("AllAlpha".to_string(), true),
                ("AllBeta".to_string(), true),
                ("TemplateNoDefaults".to_string(), false),
            ])
        );
        let bad = manifest.replace("AllBeta=true", "AllBeta=yes");
        let e = manager_gates(&bad).unwrap_err().to_string();
        assert!(e.contains("AllBeta=yes"), "{e}");
        assert!(manager_gates("kind: Service\n").unwrap().is_empty());

        let kind = "kind: Cluster\nnodes:\n- role: worker\nfeatureGates:\n  \
            InPlacePodVerticalScaling: true\n  SidecarContainers: true\n";
        let cluster = kind_gates(kind).unwrap();
        assert_eq!(cluster.len(), 2);
        assert!(kind_gates("kind: Cluster\n").unwrap().is_empty());

        // Only what the version has off by default is set; a gate it lacks is left out.
        let help_132 = "      kube:InPlacePodVerticalScaling=true|false (ALPHA - default=false)\n\
            kube:InPlacePodVerticalScalingAllocatedStatus=true|false (ALPHA - default=false)\n\
            kube:SidecarContainers=true|false (BETA - default=true)\n";
        assert_eq!(
            crate::toolchain::off_by_default(help_132, &cluster),
            BTreeMap::from([("InPlacePodVerticalScaling".to_string(), true)])
        );
        let help_128 = "  InPlacePodVerticalScaling=true|false (ALPHA - default=false)\n\
              SidecarContainers=true|false (ALPHA - default=false)\n";
        assert_eq!(
            crate::toolchain::off_by_default(help_128, &cluster),
            cluster
        );
        assert!(
            crate::toolchain::off_by_default(
                "kube:Other=true|false (ALPHA - default=false)",
                &cluster
            )
            .is_empty()
        );
    }

    const SPEC: &str = r#"
        pod.Spec.Containers[0].Image = "busybox:1.32"
        Image: "owner/sample:v1",
        Image: "fake-not-scheduled",
        url := "localhost:8080"
        label := "app:web"
        a := imageutils.GetE2EImage(imageutils.Httpd)
        c := imageutils.GetConfig(imageutils.Nginx)
        c.SetRegistry("mirror.example/lib")
        c.SetVersion("alpine")
        x.Image = c.GetE2EImage()
        d := imageutils.GetConfig(imageutils.Nginx)
        y.Image = d.GetE2EImage()
        bad := imageutils.GetE2EImage(imageutils.InvalidRegistryImage)
    "#;

    const MANIFEST: &str = r#"
	initRegistry = RegistryList{
		PromoterE2eRegistry:     "images.example/e2e",
		InvalidRegistry:         "invalid.example/invalid",
	}
	configs[Httpd] = Config{list.PromoterE2eRegistry, "httpd", "2.4.38-4"}
	configs[InvalidRegistryImage] = Config{list.InvalidRegistry, "alpine", "3.1"}
	configs[Nginx] = Config{list.PromoterE2eRegistry, "nginx", "1.14-4"}
    "#;

    #[test]
    fn the_suite_s_images_are_its_reference_literals_and_its_e2e_framework_images() {
        // "app:web" is a reference too (library/app:web): a stand-in no pod asks for is harmless.
        assert_eq!(
            literal_references(SPEC),
            ["busybox:1.32", "owner/sample:v1", "app:web"]
        );
        let uses = e2e_image_uses(SPEC);
        assert_eq!(uses.len(), 4);
        assert_eq!(
            uses[1],
            E2eImageUse {
                id: "Nginx".into(),
                registry: Some("mirror.example/lib".into()),
                version: Some("alpine".into()),
            }
        );
        assert_eq!(
            (uses[2].registry.as_deref(), uses[2].version.as_deref()),
            (None, None)
        );
        assert_eq!(
            manifest_images(MANIFEST, &uses),
            [
                "images.example/e2e/httpd:2.4.38-4",
                "mirror.example/lib/nginx:alpine",
                "images.example/e2e/nginx:1.14-4",
            ]
        );
    }

    #[test]
    fn go_mod_gives_a_replaced_version_before_the_required_one() {
        let m = "module x\n\nrequire (\n\tk8s.io/kubernetes v1.32.1 // indirect\n\tk8s.io/api v0.32.1\n)\n";
        assert_eq!(
            required_version(m, KUBERNETES_MODULE).as_deref(),
            Some("v1.32.1")
        );
        let r = format!("{m}replace (\n\tk8s.io/kubernetes => k8s.io/kubernetes v1.32.10\n)\n");
        assert_eq!(
            required_version(&r, KUBERNETES_MODULE).as_deref(),
            Some("v1.32.10")
        );
        assert_eq!(
            required_version("require k8s.io/kubernetes v1.30.0\n", KUBERNETES_MODULE).as_deref(),
            Some("v1.30.0")
        );
        assert_eq!(required_version(m, "k8s.io/client-go"), None);
    }
}
