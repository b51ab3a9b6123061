//! The existing provider: a cluster the user already has. Start with [`ExistingProvider`].
//!
//! The user names the context (`--context`); the current context is never used implicitly,
//! and a context whose API server is not the one the user named (`--server`) is refused before
//! anything is sent to it. The harness works through a kubeconfig holding only that context,
//! creates only namespaces it labels with [`OWNER_LABEL`], and on destroy removes only those:
//! it never deletes what it did not create. The cluster's own feature gates and controller
//! installation are used as they are.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams};
use kube::config::Kubeconfig;

use super::{Cluster, ClusterProvider, Profile};

pub use super::OWNER_LABEL;

/// Errors of the existing provider.
#[derive(Debug, thiserror::Error)]
pub enum ExistingError {
    /// The kubeconfig could not be read.
    #[error("read kubeconfig {}: {detail}", path.display())]
    Kubeconfig {
        /// Path.
        path: PathBuf,
        /// Cause.
        detail: String,
    },
    /// The context is not in the kubeconfig.
    #[error("context `{context}` is not in {}; its contexts: {known}", path.display())]
    NoContext {
        /// Asked for.
        context: String,
        /// Kubeconfig.
        path: PathBuf,
        /// What it has.
        known: String,
    },
    /// The context points at another server.
    #[error(
        "refusing context `{context}`: its server is {actual}, not {expected} as --server says; \
         check the context or the URL"
    )]
    ServerMismatch {
        /// Context.
        context: String,
        /// Its server.
        actual: String,
        /// What the user named.
        expected: String,
    },
    /// The cluster did not answer.
    #[error("reach the API server of context `{context}`: {detail}")]
    Unreachable {
        /// Context.
        context: String,
        /// Cause.
        detail: String,
    },
    /// Cleaning up failed.
    #[error("clean up on `{name}`: {}", errors.join("; "))]
    Teardown {
        /// Cluster name.
        name: String,
        /// Failures.
        errors: Vec<String>,
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

/// Uses one context of a kubeconfig.
#[derive(Debug, Clone)]
pub struct ExistingProvider {
    /// The user's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The context to use.
    pub context: String,
    /// The server the context must point at, if the user named one.
    pub server: Option<String>,
    /// Where the harness keeps its one-context kubeconfig.
    pub root: PathBuf,
}

/// The kubeconfig the user would get by default: `$KUBECONFIG` (its first entry), then
/// `~/.kube/config`.
pub fn default_kubeconfig() -> PathBuf {
    if let Some(k) = std::env::var_os("KUBECONFIG").filter(|k| !k.is_empty())
        && let Some(first) = std::env::split_paths(&k).next()
    {
        return first;
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".kube/config")
}

fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

impl ExistingProvider {
    /// The kubeconfig reduced to the named context (made the current one), its relative file
    /// references made absolute; refuses a missing context or a server other than the named
    /// one.
    pub fn one_context(&self) -> Result<Kubeconfig, ExistingError> {
        let path = &self.kubeconfig;
        let kc = Kubeconfig::read_from(path).map_err(|e| ExistingError::Kubeconfig {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let ctx = kc
            .contexts
            .iter()
            .find(|c| c.name == self.context)
            .cloned()
            .ok_or_else(|| ExistingError::NoContext {
                context: self.context.clone(),
                path: path.clone(),
                known: kc
                    .contexts
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let inner = ctx.context.clone().unwrap_or_default();
        let mut cluster = kc
            .clusters
            .iter()
            .find(|c| c.name == inner.cluster)
            .cloned()
            .ok_or_else(|| ExistingError::Kubeconfig {
                path: path.clone(),
                detail: format!(
                    "context `{}` names cluster `{}`, which it does not define",
                    self.context, inner.cluster
                ),
            })?;
        let actual = cluster
            .cluster
            .as_ref()
            .and_then(|c| c.server.clone())
            .unwrap_or_default();
        if let Some(expected) = &self.server
            && !same_server(&actual, expected)
        {
            return Err(ExistingError::ServerMismatch {
                context: self.context.clone(),
                actual,
                expected: expected.clone(),
            });
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let absolute = |p: &mut Option<String>| {
            if let Some(s) = p.as_mut()
                && Path::new(s.as_str()).is_relative()
            {
                *s = base.join(&*s).display().to_string();
            }
        };
        if let Some(c) = cluster.cluster.as_mut() {
            absolute(&mut c.certificate_authority);
        }
        let mut users = vec![];
        if let Some(user) = &inner.user
            && let Some(mut u) = kc.auth_infos.iter().find(|a| &a.name == user).cloned()
        {
            if let Some(a) = u.auth_info.as_mut() {
                absolute(&mut a.client_certificate);
                absolute(&mut a.client_key);
                absolute(&mut a.token_file);
            }
            users.push(u);
        }
        Ok(Kubeconfig {
            clusters: vec![cluster],
            contexts: vec![ctx],
            auth_infos: users,
            current_context: Some(self.context.clone()),
            ..Default::default()
        })
    }

    /// What `create` would do, as lines for a dry run.
    pub fn plan(&self, name: &str) -> Vec<String> {
        vec![
            format!(
                "use context `{}` of {} ({})",
                self.context,
                self.kubeconfig.display(),
                match &self.server {
                    Some(s) => format!("its server must be {s}"),
                    None => "any server".into(),
                }
            ),
            format!(
                "write a kubeconfig with only that context to {}",
                self.root.join(name).join("kubeconfig").display()
            ),
            format!("label every namespace the harness creates {OWNER_LABEL}={name}"),
            format!("on destroy: delete only namespaces labelled {OWNER_LABEL}={name}"),
        ]
    }
}

impl ClusterProvider for ExistingProvider {
    type Cluster = ExistingCluster;
    type Error = ExistingError;

    async fn create(
        &self,
        name: &str,
        profile: &Profile,
    ) -> Result<ExistingCluster, ExistingError> {
        let kc = self.one_context()?;
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).map_err(|source| ExistingError::Io {
            path: dir.clone(),
            source,
        })?;
        let kubeconfig = dir.join("kubeconfig");
        let text = serde_json::to_string_pretty(&kc).expect("a kubeconfig serializes");
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let io = |source| ExistingError::Io {
                path: kubeconfig.clone(),
                source,
            };
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&kubeconfig)
                .map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
        }
        let cluster = ExistingCluster {
            name: name.into(),
            dir,
            kubeconfig,
            context: self.context.clone(),
            done: false,
        };
        let client = cluster.client().await?;
        let version = client
            .apiserver_version()
            .await
            .map_err(|e| ExistingError::Unreachable {
                context: self.context.clone(),
                detail: e.to_string(),
            })?;
        let minor: String = version
            .minor
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if version.major != profile.kubernetes.major.to_string()
            || minor != profile.kubernetes.minor.to_string()
        {
            tracing::warn!(
                context = self.context,
                "the cluster runs Kubernetes {}, the run was asked for {}: results are \
                 classified against the ledger as {}",
                version.git_version,
                profile.kubernetes,
                profile.kubernetes
            );
        }
        if !profile.feature_gates.is_empty() {
            tracing::warn!(
                context = self.context,
                "the profile asks for feature gates {:?}; an existing cluster runs with its own",
                profile.feature_gates
            );
        }
        Ok(cluster)
    }
}

/// One context of an existing cluster, used by one run.
#[derive(Debug)]
pub struct ExistingCluster {
    name: String,
    dir: PathBuf,
    kubeconfig: PathBuf,
    context: String,
    done: bool,
}

impl ExistingCluster {
    /// A client for the context.
    pub async fn client(&self) -> Result<kube::Client, ExistingError> {
        super::admin_client(&self.kubeconfig)
            .await
            .map_err(|e| ExistingError::Unreachable {
                context: self.context.clone(),
                detail: format!("{e:#}"),
            })
    }

    /// The namespaces the harness created here (and only those).
    pub async fn owned_namespaces(&self) -> Result<Vec<String>, ExistingError> {
        let client = self.client().await?;
        let nss: Api<Namespace> = Api::all(client);
        let list = nss
            .list(&ListParams::default().labels(&format!("{OWNER_LABEL}={}", self.name)))
            .await
            .map_err(|e| ExistingError::Unreachable {
                context: self.context.clone(),
                detail: e.to_string(),
            })?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect())
    }

    fn teardown(&mut self) -> Result<(), ExistingError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut errors = vec![];
        // Namespaces labelled by this run only.
        let owned = on_own_runtime(async {
            let names = self.owned_namespaces().await.map_err(|e| e.to_string())?;
            let client = self.client().await.map_err(|e| e.to_string())?;
            let nss: Api<Namespace> = Api::all(client);
            let mut failed = vec![];
            for n in &names {
                if let Err(e) = nss.delete(n, &DeleteParams::background()).await {
                    failed.push(format!("delete namespace {n}: {e}"));
                }
            }
            Ok(failed)
        });
        match owned {
            Ok(failed) => errors.extend(failed),
            Err(e) => errors.push(e),
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            errors.push(format!("remove {}: {e}", self.dir.display()));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ExistingError::Teardown {
                name: self.name.clone(),
                errors,
            })
        }
    }
}

/// Runs `fut` to completion on a runtime of its own in a scoped thread: the [`Cluster`] trait's
/// methods are synchronous and also run from `Drop`, possibly inside another runtime.
fn on_own_runtime<T: Send>(
    fut: impl std::future::Future<Output = Result<T, String>> + Send,
) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(fut)
        })
        .join()
        .unwrap_or_else(|_| Err("the cleanup thread panicked".into()))
    })
}

impl Cluster for ExistingCluster {
    type Error = ExistingError;

    fn name(&self) -> &str {
        &self.name
    }

    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Writes what the harness can see without node access: the server version and the
    /// events of the namespaces it created.
    fn export_logs(&self, dest: &Path) -> Result<(), ExistingError> {
        std::fs::create_dir_all(dest).map_err(|source| ExistingError::Io {
            path: dest.to_path_buf(),
            source,
        })?;
        let out = on_own_runtime(async {
            let client = self.client().await.map_err(|e| e.to_string())?;
            let version = client
                .apiserver_version()
                .await
                .map_err(|e| e.to_string())?;
            let mut text = format!(
                "context: {}\nserver version: {}\n",
                self.context, version.git_version
            );
            for ns in self.owned_namespaces().await.map_err(|e| e.to_string())? {
                let events: Api<k8s_openapi::api::core::v1::Event> =
                    Api::namespaced(client.clone(), &ns);
                let list = events
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                for e in list.items {
                    text.push_str(&format!(
                        "{ns} {} {}: {}\n",
                        e.reason.unwrap_or_default(),
                        e.involved_object.name.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    ));
                }
            }
            Ok(text)
        });
        let text = out.map_err(|detail| ExistingError::Unreachable {
            context: self.context.clone(),
            detail,
        })?;
        let file = dest.join("cluster.txt");
        std::fs::write(&file, text).map_err(|source| ExistingError::Io { path: file, source })
    }

    fn destroy(mut self) -> Result<(), ExistingError> {
        self.teardown()
    }
}

impl Drop for ExistingCluster {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("warning: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KC: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443
- name: test
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
contexts:
- name: prod
  context: {cluster: prod, user: u}
- name: test
  context: {cluster: test, user: u}
current-context: prod
users:
- name: u
  user: {token: t}
"#;

    fn provider(dir: &Path, server: Option<&str>) -> ExistingProvider {
        let path = dir.join("config");
        std::fs::write(&path, KC).unwrap();
        ExistingProvider {
            kubeconfig: path,
            context: "test".into(),
            server: server.map(Into::into),
            root: dir.join("root"),
        }
    }

    #[test]
    fn only_the_named_context_is_kept_and_made_current() {
        let tmp = tempfile::tempdir().unwrap();
        let kc = provider(tmp.path(), Some("https://127.0.0.1:6443/"))
            .one_context()
            .unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("test"));
        assert_eq!(kc.contexts.len(), 1);
        assert_eq!(kc.clusters.len(), 1);
        let ca = kc.clusters[0]
            .cluster
            .as_ref()
            .unwrap()
            .certificate_authority
            .clone()
            .unwrap();
        assert_eq!(PathBuf::from(ca), tmp.path().join("ca.crt"));
    }

    #[test]
    fn another_server_or_a_missing_context_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let e = provider(tmp.path(), Some("https://prod.example:6443"))
            .one_context()
            .unwrap_err()
            .to_string();
        assert!(e.contains("refusing context `test`"), "{e}");
        let mut p = provider(tmp.path(), None);
        p.context = "staging".into();
        let e = p.one_context().unwrap_err().to_string();
        assert!(e.contains("its contexts: prod, test"), "{e}");
    }
}
