//! The provider contract (create, kubeconfig, export logs, destroy) on the local provider, on
//! the existing provider over a real local cluster, and on the kind provider with a fake
//! command runner in place of kind: retries on transient failures, logs exported before every
//! delete, and a partial cluster deleted when create fails mid-way.

mod common;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{default_profile, provider};
use harness::cluster::existing::{ExistingProvider, OWNER_LABEL};
use harness::cluster::kind::{
    CommandLine, CommandOutput, CommandRunner, KindBinary, KindOptions, KindProvider,
};
use harness::cluster::{Cluster, ClusterProvider, Profile};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

/// Creates, checks the kubeconfig, exports logs, destroys; returns the kubeconfig path.
async fn contract<P: ClusterProvider>(p: &P, name: &str, profile: &Profile, logs: &Path) -> PathBuf
where
    <P::Cluster as Cluster>::Error: std::fmt::Debug,
    P::Error: std::fmt::Debug,
{
    let c = p.create(name, profile).await.expect("create");
    assert_eq!(c.name(), name);
    let kubeconfig = c.kubeconfig().to_path_buf();
    let text = std::fs::read_to_string(&kubeconfig).expect("a kubeconfig file");
    assert!(text.contains("server"), "{text}");
    c.export_logs(logs).expect("export logs");
    let exported = std::fs::read_dir(logs).expect("logs dir").count();
    assert!(exported > 0, "no logs in {}", logs.display());
    c.destroy().expect("destroy");
    assert!(!kubeconfig.exists(), "{} left behind", kubeconfig.display());
    kubeconfig
}

#[tokio::test]
async fn the_local_provider_keeps_the_contract() {
    let (p, _root) = provider();
    let logs = tempfile::tempdir().unwrap();
    contract(&p, "contract", &default_profile(), logs.path()).await;
    assert!(logs.path().join("kube-apiserver.log").is_file());
}

/// kind, as far as the provider can tell: scripted create outcomes, every call recorded; a
/// successful create writes the kubeconfig, export writes a node log.
#[derive(Clone, Default)]
struct FakeKind {
    creates: Arc<Mutex<VecDeque<Result<(), String>>>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl FakeKind {
    fn scripted(creates: &[Result<(), &str>]) -> Self {
        let f = Self::default();
        *f.creates.lock().unwrap() = creates
            .iter()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect();
        f
    }

    /// The calls as verbs: `create`, `export`, `delete`.
    fn verbs(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

fn flag<'a>(cmd: &'a CommandLine, name: &str) -> &'a str {
    let i = cmd.args.iter().position(|a| a == name).expect(name);
    &cmd.args[i + 1]
}

impl CommandRunner for FakeKind {
    fn run(&self, cmd: &CommandLine) -> std::io::Result<CommandOutput> {
        let verb = match (cmd.args[0].as_str(), cmd.args[1].as_str()) {
            ("create", "cluster") => "create",
            ("export", "logs") => "export",
            ("delete", "cluster") => "delete",
            other => panic!("unexpected kind command {other:?}"),
        };
        self.calls.lock().unwrap().push(verb.into());
        let ok = CommandOutput {
            stdout: String::new(),
            success: true,
            stderr: String::new(),
        };
        match verb {
            "create" => {
                let config = std::fs::read_to_string(flag(cmd, "--config"))?;
                assert!(config.contains("kind.x-k8s.io/v1alpha4"), "{config}");
                match self
                    .creates
                    .lock()
                    .unwrap()
                    .pop_front()
                    .expect("a scripted create")
                {
                    Ok(()) => {
                        std::fs::write(
                            flag(cmd, "--kubeconfig"),
                            "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:1\n",
                        )?;
                        Ok(ok)
                    }
                    Err(stderr) => Ok(CommandOutput {
                        stdout: String::new(),
                        success: false,
                        stderr,
                    }),
                }
            }
            "export" => {
                let dir = Path::new(&cmd.args[2]);
                std::fs::create_dir_all(dir)?;
                std::fs::write(dir.join("kind-version.txt"), "fake")?;
                Ok(ok)
            }
            _ => Ok(ok),
        }
    }
}

fn kind(fake: &FakeKind, root: &Path) -> KindProvider {
    KindProvider::new(
        KindBinary::Path("/fake/kind".into()),
        Arc::new(fake.clone()),
        KindOptions {
            root: root.join("clusters"),
            logs: root.join("logs"),
            attempts: 3,
            wait: Duration::from_secs(60),
            node: Default::default(),
            env: vec![],
        },
    )
}

#[tokio::test]
async fn the_kind_provider_keeps_the_contract_and_exports_logs_before_delete() {
    let fake = FakeKind::scripted(&[Ok(())]);
    let root = tempfile::tempdir().unwrap();
    let p = kind(&fake, root.path());
    let logs = root.path().join("asked");
    contract(&p, "k1", &default_profile(), &logs).await;
    assert_eq!(fake.verbs(), ["create", "export", "export", "delete"]);
    assert!(root.path().join("logs/k1/kind-version.txt").is_file());
    assert!(!root.path().join("clusters/k1").exists());
}

#[tokio::test]
async fn a_create_failing_mid_way_exports_logs_and_deletes_the_partial_cluster() {
    let fake = FakeKind::scripted(&[Err(
        "Creating cluster ...\n ✓ Preparing nodes\nERROR: failed to create cluster: \
         unsupported configuration: featureGates key NoSuchGate",
    )]);
    let root = tempfile::tempdir().unwrap();
    let p = kind(&fake, root.path());
    let e = p.create("k2", &default_profile()).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("after 1 attempt(s)"), "{msg}");
    assert!(msg.contains("NoSuchGate"), "{msg}");
    assert!(msg.contains("partial cluster was deleted"), "{msg}");
    assert_eq!(fake.verbs(), ["create", "export", "delete"]);
    assert!(root.path().join("logs/k2/kind-version.txt").is_file());
    assert!(
        !root.path().join("clusters/k2").exists(),
        "nothing half-written"
    );
}

#[tokio::test]
async fn transient_failures_are_retried_a_bounded_number_of_times() {
    let fake = FakeKind::scripted(&[
        Err("ERROR: failed to create cluster: failed to pull image: i/o timeout"),
        Ok(()),
    ]);
    let root = tempfile::tempdir().unwrap();
    let p = kind(&fake, root.path());
    let c = p.create("k3", &default_profile()).await.unwrap();
    assert_eq!(fake.verbs(), ["create", "export", "delete", "create"]);
    drop(c);
    assert_eq!(
        fake.verbs()[4..],
        ["export", "delete"],
        "dropping a cluster deletes it"
    );

    let always = "ERROR: failed to create cluster: TLS handshake timeout";
    let fake = FakeKind::scripted(&[Err(always), Err(always), Err(always)]);
    let p = kind(&fake, root.path());
    let e = p.create("k4", &default_profile()).await.unwrap_err();
    assert!(e.to_string().contains("after 3 attempt(s)"), "{e}");
    assert_eq!(fake.verbs().iter().filter(|v| *v == "create").count(), 3);
    assert_eq!(fake.verbs().iter().filter(|v| *v == "delete").count(), 3);
}

#[tokio::test]
async fn the_existing_provider_keeps_the_contract_and_deletes_only_its_own_namespaces() {
    let (local, _root) = common::cluster(&default_profile()).await;
    let admin = local.client();
    let state = tempfile::tempdir().unwrap();
    let existing = ExistingProvider {
        kubeconfig: local.kubeconfig().to_path_buf(),
        context: "harness".into(),
        server: Some(local.server().to_string()),
        root: state.path().to_path_buf(),
    };

    // Not the server the user named: refused before anything is sent.
    let mut elsewhere = existing.clone();
    elsewhere.server = Some("https://127.0.0.1:1".into());
    let e = elsewhere.create("x", &default_profile()).await.unwrap_err();
    assert!(e.to_string().contains("refusing context `harness`"), "{e}");

    let logs = tempfile::tempdir().unwrap();
    contract(&existing, "contract", &default_profile(), logs.path()).await;
    assert!(logs.path().join("cluster.txt").is_file());

    let nss: Api<Namespace> = Api::all(admin.clone());
    let ns = |name: &str, owner: Option<&str>| {
        let mut n = serde_json::json!({"metadata": {"name": name}});
        if let Some(o) = owner {
            n["metadata"]["labels"] = serde_json::json!({OWNER_LABEL: o});
        }
        serde_json::from_value::<Namespace>(n).unwrap()
    };
    let c = existing.create("run-1", &default_profile()).await.unwrap();
    for n in [
        ns("users-own", None),
        ns("another-run", Some("run-2")),
        ns("ours", Some("run-1")),
    ] {
        nss.create(&PostParams::default(), &n).await.unwrap();
    }
    c.destroy().unwrap();
    let phase = |n: Option<Namespace>| {
        n.and_then(|n| n.status)
            .and_then(|s| s.phase)
            .unwrap_or_else(|| "Gone".into())
    };
    assert_eq!(phase(nss.get_opt("users-own").await.unwrap()), "Active");
    assert_eq!(phase(nss.get_opt("another-run").await.unwrap()), "Active");
    assert_ne!(phase(nss.get_opt("ours").await.unwrap()), "Active");
}

#[tokio::test]
async fn gc_removes_kind_clusters_of_killed_runs_only() {
    let fake = FakeKind::scripted(&[Ok(()), Ok(())]);
    let root = tempfile::tempdir().unwrap();
    let p = kind(&fake, root.path());
    let killed = p.create("killed", &default_profile()).await.unwrap();
    let alive = p.create("alive", &default_profile()).await.unwrap();
    // A SIGKILLed run drops nothing; its owner record names a process that is gone.
    std::mem::forget(killed);
    let owner_path = root.path().join("clusters/killed/owner.json");
    let mut owner: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&owner_path).unwrap()).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    owner["owner"]["pid"] = serde_json::json!(child.id());
    child.wait().unwrap();
    std::fs::write(&owner_path, serde_json::to_vec(&owner).unwrap()).unwrap();

    let before = fake.verbs().len();
    assert_eq!(p.gc().unwrap(), ["killed"]);
    assert_eq!(fake.verbs()[before..], ["export", "delete"]);
    assert!(!root.path().join("clusters/killed").exists());
    assert!(root.path().join("logs/killed/kind-version.txt").is_file());
    assert!(
        root.path().join("clusters/alive").is_dir(),
        "a live run's cluster is left alone"
    );
    assert!(p.gc().unwrap().is_empty());
    drop(alive);
}
