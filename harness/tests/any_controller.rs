//! "Any controller", shown: a second controller under test, the echo controller of the test
//! fixtures (`fixtures/echo-controller`: a few hundred lines of Go, standard library only),
//! brought under test by registering a [`Family`] and implementing [`Controller`] here, outside
//! the harness. It is built from its module's checkout, installed on the local provider with
//! the RBAC it ships (its process runs with its ServiceAccount's token), and a scenario runs on
//! it through the same runner as the catalog's: the cell, the component checks, the named
//! steps and the teardown are the harness's, with nothing of OpenKruise in the way.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use harness::cluster::local::{LocalCluster, free_port};
use harness::controller::manifests::apply_all;
use harness::controller::{
    Component, Controller, ControllerError, ControllerRef, Family, Host, Installation, Manager,
    register, service_account_token,
};
use harness::process::ComponentSpec;
use harness::results::{Outcome, Verdict};
use harness::scenario::{Ctx, Scenario};
use harness::toolchain::{GoEnv, Toolchain, ToolchainError};
use harness::wait::{Check, poll};

/// The fixture's module, as its `go.mod` declares it.
const MODULE: &str = "example.com/harness/echo-controller";
/// Its binary and process name.
const BINARY: &str = "echo-controller";
/// Where it runs and whose token it uses (`config/rbac.yaml`).
const NAMESPACE: &str = "echo-system";
/// Its API.
const API_VERSION: &str = "fixtures.example.com/v1";

/// The fixture's checkout.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/echo-controller")
}

/// The echo controller as a family: `echo@<checkout>`.
#[derive(Debug)]
struct EchoFamily;

static FAMILY: EchoFamily = EchoFamily;

impl Family for EchoFamily {
    fn name(&self) -> &'static str {
        "echo"
    }

    fn module(&self) -> &'static str {
        MODULE
    }

    fn default_version(&self) -> &'static str {
        "checkout"
    }

    fn releases<'a>(&'a self, _: &'a GoEnv) -> BoxFuture<'a, Result<Vec<String>, ToolchainError>> {
        Box::pin(async { Ok(vec![]) })
    }

    fn known_gates<'a>(
        &'a self,
        _: &'a GoEnv,
        _: &'a ControllerRef,
    ) -> BoxFuture<'a, Result<Vec<String>, ControllerError>> {
        Box::pin(async { Ok(vec![]) })
    }

    fn controller(&self, reference: &ControllerRef, _: bool) -> Box<dyn Controller> {
        Box::new(Echo {
            reference: reference.clone(),
        })
    }
}

/// One checkout of the echo controller.
#[derive(Debug)]
struct Echo {
    reference: ControllerRef,
}

impl Echo {
    fn dir(&self) -> &Path {
        self.reference.checkout.as_deref().expect("a checkout")
    }

    /// Its manifests: the CRD, then the namespace, ServiceAccount and RBAC.
    fn manifests(&self) -> Result<Vec<serde_json::Value>, ControllerError> {
        let files = [
            self.dir().join("config/crd.yaml"),
            self.dir().join("config/rbac.yaml"),
        ];
        harness::cluster::seed::load(&files).map_err(|e| ControllerError::NotInstalled {
            detail: format!("{e:#}"),
        })
    }

    /// Installs it as a local process beside `cluster`'s control plane and waits until it
    /// answers `/readyz` (its first list of Echos reconciled).
    async fn install_local(
        &self,
        cluster: &mut LocalCluster,
        toolchain: &Toolchain,
    ) -> Result<Manager, ControllerError> {
        let binary = toolchain.build_checkout(self.dir(), ".", BINARY).await?;
        let client = cluster.client();
        apply_all(&client, &self.manifests()?, Duration::from_secs(60)).await?;
        let token = service_account_token(&client, NAMESPACE, BINARY).await?;
        let work = cluster.layout().work(BINARY);
        std::fs::create_dir_all(&work).map_err(|e| io(&work, e))?;
        let (token_file, ca_file) = (work.join("token"), work.join("ca.pem"));
        std::fs::write(&token_file, token).map_err(|e| io(&token_file, e))?;
        std::fs::write(&ca_file, cluster.ca_pem()?).map_err(|e| io(&ca_file, e))?;
        let health = free_port()?;
        let spec = ComponentSpec {
            name: BINARY.into(),
            binary,
            args: vec![
                format!("--server={}", cluster.server()),
                format!("--certificate-authority={}", ca_file.display()),
                format!("--token-file={}", token_file.display()),
                format!("--health-addr=127.0.0.1:{health}"),
                "--resync=10s".into(),
            ],
            env: vec![],
            clear_env: false,
            dir: None,
        };
        let supervisor = cluster.spawn_supervised(&spec)?;
        let manager = Manager {
            name: BINARY.into(),
            version: self.reference.version.clone(),
            record: supervisor.current(),
            log: cluster.layout().log(BINARY),
            webhook_port: 0,
            health_port: health,
            gates: BTreeMap::new(),
            supervisor: Some(supervisor),
            lease: None,
        };
        let ready = manager
            .wait_ready("the echo controller's /readyz", Duration::from_secs(60))
            .await;
        if let Err(e) = ready {
            manager.check(&harness::controller::Window::all()).await?;
            return Err(e);
        }
        Ok(manager)
    }
}

fn io(path: &Path, source: std::io::Error) -> ControllerError {
    ControllerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Controller for Echo {
    fn reference(&self) -> &ControllerRef {
        &self.reference
    }

    fn has_gate(&self, _: &str) -> bool {
        false
    }

    fn api_groups(&self) -> &'static [&'static str] {
        &["fixtures.example.com"]
    }

    fn crds<'a>(&'a self) -> BoxFuture<'a, Result<Vec<serde_json::Value>, ControllerError>> {
        Box::pin(async move {
            Ok(self
                .manifests()?
                .into_iter()
                .filter(|d| d["kind"] == "CustomResourceDefinition")
                .collect())
        })
    }

    fn prepare<'a>(
        &'a self,
        toolchain: &'a Toolchain,
    ) -> BoxFuture<'a, Result<(), ControllerError>> {
        Box::pin(async move {
            toolchain.build_checkout(self.dir(), ".", BINARY).await?;
            Ok(())
        })
    }

    fn install<'a>(
        &'a self,
        host: Host<'a>,
        toolchain: &'a Toolchain,
        _: &'a BTreeMap<String, bool>,
    ) -> BoxFuture<'a, Result<Installation, ControllerError>> {
        Box::pin(async move {
            match host {
                Host::Processes(cluster) => {
                    let manager = self.install_local(cluster, toolchain).await?;
                    let components: Vec<Box<dyn Component>> = vec![Box::new(manager)];
                    Ok(Installation::new(self.reference.clone(), components))
                }
                _ => Err(ControllerError::NotInstalled {
                    detail: "the echo controller runs as a local process: use the local provider"
                        .into(),
                }),
            }
        })
    }

    fn namespace(&self) -> &'static str {
        NAMESPACE
    }
}

/// The ConfigMaps of Echo `name` in the scenario's namespace, by name, with their messages.
async fn copies(ctx: &Ctx, name: &str) -> anyhow::Result<BTreeMap<String, String>> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let label = format!("fixtures.example.com/echo={name}");
    let list = ctx
        .api::<ConfigMap>()
        .list(&kube::api::ListParams::default().labels(&label))
        .await?;
    Ok(list
        .items
        .into_iter()
        .map(|c| {
            let message = c
                .data
                .and_then(|d| d.get("message").cloned())
                .unwrap_or_default();
            (c.metadata.name.unwrap_or_default(), message)
        })
        .collect())
}

/// Waits until Echo `name`'s ConfigMaps are exactly `want` (name → message).
async fn copies_become(ctx: &Ctx, name: &str, want: &[(&str, &str)]) -> anyhow::Result<()> {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(n, m)| (n.to_string(), m.to_string()))
        .collect();
    let what = format!("the copies of Echo {name} to be {want:?}");
    poll(
        &what,
        ctx.timeouts.converge,
        Duration::from_millis(250),
        || {
            let want = want.clone();
            async move {
                match copies(ctx, name).await {
                    Ok(got) if got == want => Check::Met,
                    Ok(got) => Check::Pending(format!("{got:?}")),
                    Err(e) => Check::Pending(format!("{e:#}")),
                }
            }
        },
    )
    .await?;
    Ok(())
}

/// The scenario: an Echo's copies follow its spec, a deleted copy comes back, and its status
/// reports what was done.
fn keeps_its_copies() -> Scenario {
    Scenario::new(
        "echo/keeps-its-copies",
        "an Echo's ConfigMap copies follow its message and count; a deleted copy comes back",
        &[],
        |ctx: Ctx| async move {
            let name = "hello";
            ctx.step("create an Echo of two copies", async {
                ctx.create(serde_json::json!({
                    "apiVersion": API_VERSION, "kind": "Echo",
                    "metadata": {"name": name, "namespace": ctx.namespace},
                    "spec": {"message": "one", "copies": 2},
                }))
                .await?;
                copies_become(&ctx, name, &[("hello-0", "one"), ("hello-1", "one")]).await
            })
            .await?;
            ctx.step("its status reports the copies", async {
                let expected = "apiVersion: fixtures.example.com/v1\nkind: Echo\n\
                    metadata: {name: hello}\n\
                    status: {observedGeneration: 1, copies: 2, message: one}\n";
                ctx.wait_subset(expected, ctx.timeouts.converge).await
            })
            .await?;
            ctx.step("change the message and drop a copy", async {
                let spec = serde_json::json!({"spec": {"message": "two", "copies": 1}});
                ctx.patch(API_VERSION, "Echo", name, spec).await?;
                copies_become(&ctx, name, &[("hello-0", "two")]).await
            })
            .await?;
            ctx.step("a deleted copy comes back", async {
                ctx.delete("v1", "ConfigMap", "hello-0").await?;
                // Gone and back: a new object, not the old one still terminating.
                let old = ctx
                    .api::<k8s_openapi::api::core::v1::ConfigMap>()
                    .get_opt("hello-0")
                    .await?
                    .and_then(|c| c.metadata.uid);
                poll(
                    "hello-0 recreated",
                    ctx.timeouts.converge,
                    Duration::from_millis(250),
                    || {
                        let old = old.clone();
                        let api = ctx.api::<k8s_openapi::api::core::v1::ConfigMap>();
                        async move {
                            match api.get_opt("hello-0").await {
                                Ok(Some(c)) if c.metadata.uid != old => Check::Met,
                                Ok(_) => Check::Pending("not recreated".into()),
                                Err(e) => Check::Pending(e.to_string()),
                            }
                        }
                    },
                )
                .await?;
                copies_become(&ctx, name, &[("hello-0", "two")]).await
            })
            .await?;
            Ok(())
        },
    )
}

/// A scenario that takes away the controller's right to create ConfigMaps, then gives it an
/// Echo: its body passes, and what judges it is the harness's check of the controller's log.
fn loses_a_right() -> Scenario {
    Scenario::new(
        "echo/loses-a-right",
        "with the right to create ConfigMaps revoked, the controller is denied",
        &[],
        |ctx: Ctx| async move {
            ctx.step("revoke its right to create ConfigMaps", async {
                let rules = serde_json::json!({"rules": [
                    {"apiGroups": ["fixtures.example.com"], "resources": ["echoes"],
                     "verbs": ["get", "list", "watch"]},
                    {"apiGroups": ["fixtures.example.com"], "resources": ["echoes/status"],
                     "verbs": ["get", "update", "patch"]},
                    {"apiGroups": [""], "resources": ["configmaps"],
                     "verbs": ["get", "list", "watch", "update", "patch", "delete"]},
                ]});
                ctx.patch("rbac.authorization.k8s.io/v1", "ClusterRole", BINARY, rules)
                    .await?;
                denied(&ctx).await
            })
            .await?;
            ctx.step("give it an Echo", async {
                ctx.create(serde_json::json!({
                    "apiVersion": API_VERSION, "kind": "Echo",
                    "metadata": {"name": "denied", "namespace": ctx.namespace},
                    "spec": {"message": "none", "copies": 1},
                }))
                .await?;
                // Reconciled (its status written) with no copy made: the create was refused.
                let expected = "apiVersion: fixtures.example.com/v1\nkind: Echo\n\
                    metadata: {name: denied}\n\
                    status: {observedGeneration: 1, copies: 0}\n";
                ctx.wait_subset(expected, ctx.timeouts.converge).await
            })
            .await
        },
    )
}

/// Waits until the authorizer refuses the controller's ServiceAccount `create configmaps` in
/// the scenario's namespace (it learns of a changed ClusterRole from its informer).
async fn denied(ctx: &Ctx) -> anyhow::Result<()> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let reviews: kube::Api<SubjectAccessReview> = kube::Api::all(ctx.client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{NAMESPACE}:{BINARY}")),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ctx.namespace.clone()),
                verb: Some("create".into()),
                resource: Some("configmaps".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let what = "the controller refused `create configmaps`";
    poll(
        what,
        ctx.timeouts.converge,
        Duration::from_millis(250),
        || {
            let (reviews, review) = (reviews.clone(), review.clone());
            async move {
                match reviews.create(&Default::default(), &review).await {
                    Ok(r) if r.status.as_ref().is_some_and(|s| !s.allowed) => Check::Met,
                    Ok(_) => Check::Pending("still allowed".into()),
                    Err(e) => Check::Pending(e.to_string()),
                }
            }
        },
    )
    .await?;
    Ok(())
}

/// Registers the echo family once per test process.
fn echo_ref() -> ControllerRef {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| register(&FAMILY).unwrap());
    format!("echo@{}", checkout().display()).parse().unwrap()
}

/// Runs `scenarios` on the echo controller on a local cluster of their own, and checks that
/// the run left nothing behind.
async fn run(scenarios: Vec<Scenario>) -> Vec<harness::results::ScenarioResult> {
    common::run_scenarios(scenarios, &echo_ref(), "any-controller").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_controller_runs_a_scenario_through_the_trait_on_the_local_provider() {
    assert_eq!(echo_ref().kind.name(), "echo");
    let results = run(vec![keeps_its_copies()]).await;
    assert_eq!(results.len(), 1, "{results:?}");
    let r = &results[0];
    assert!(
        matches!(r.outcome, Outcome::Judged(Verdict::Pass)),
        "{}: {:?}: {}",
        r.scenario,
        r.outcome,
        r.failure.as_deref().unwrap_or_default()
    );
    let steps: Vec<&str> = r.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        steps,
        [
            "create an Echo of two copies",
            "its status reports the copies",
            "change the message and drop a copy",
            "a deleted copy comes back"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_second_controllers_rbac_denial_fails_its_scenario() {
    let results = run(vec![loses_a_right()]).await;
    assert_eq!(results.len(), 1, "{results:?}");
    let r = &results[0];
    let failure = r.failure.as_deref().unwrap_or_default();
    assert!(
        matches!(r.outcome, Outcome::Judged(Verdict::Fail)),
        "{:?}: {failure}",
        r.outcome
    );
    assert!(
        failure.contains("denied by its RBAC")
            && failure.contains("system:serviceaccount:echo-system:echo-controller"),
        "{failure}"
    );
    // The body itself got through both steps.
    assert!(r.steps.iter().all(|s| !s.failed), "{:?}", r.steps);
    assert_eq!(r.steps.len(), 2, "{:?}", r.steps);
}
