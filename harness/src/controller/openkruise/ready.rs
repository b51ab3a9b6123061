//! Readiness of a local install: CRDs served, webhook configurations patched with the manager's
//! URL and CA, `/readyz` up, and a smoke CloneSet admitted and reconciled ([`wait_ready`]).

use super::*;

/// Whether every webhook of both configurations points at the manager's URL with a CA.
pub async fn webhooks_patched(client: &kube::Client, port: u16) -> Result<(), String> {
    let prefix = format!("https://127.0.0.1:{port}/");
    for (name, cc) in webhook_client_configs(client).await? {
        let url = cc.url.unwrap_or_default();
        if !url.starts_with(&prefix) {
            return Err(format!("webhook {name} has url {url:?}, want {prefix}..."));
        }
        if cc.ca_bundle.as_ref().is_none_or(|b| b.0.is_empty()) {
            return Err(format!("webhook {name} has no caBundle"));
        }
    }
    Ok(())
}

pub(super) async fn wait_ready(
    cluster: &LocalCluster,
    manager: &Manager,
    timeout: Duration,
) -> Result<(), ControllerError> {
    let client = &cluster.client();
    let steps: Vec<Step<'_>> = vec![
        (
            "manager /readyz",
            Box::new(move || {
                async move {
                    match http_get_status(manager.health_port, "/readyz").await? {
                        200 => Ok(true),
                        code => Err(format!("HTTP {code}")),
                    }
                }
                .boxed()
            }),
        ),
        (
            "webhook configurations",
            Box::new(move || {
                webhooks_patched(client, manager.webhook_port)
                    .map_ok(|_| true)
                    .boxed()
            }),
        ),
    ];
    // A cluster of real nodes only pulls from its own registry: the harness's busybox.
    let real_only = cluster.state().profile.nodes.is_empty();
    let ready = Readiness {
        client,
        version: &manager.version,
        timeout,
        interval: Duration::from_millis(200),
        smoke_image: if real_only {
            crate::toolchain::images::BUSYBOX_V1_IMAGE
        } else {
            SMOKE_IMAGE
        },
    };
    ready
        .wait(steps, || {
            futures::future::ready(manager.check_process(&crate::controller::Window::all())).boxed()
        })
        .await
}

/// A named readiness probe: `Ok(true)` when the step is done, `Err` with what it saw.
pub(super) type Step<'a> = (
    &'static str,
    Box<dyn Fn() -> BoxFuture<'a, Result<bool, String>> + Send + Sync + 'a>,
);

/// How a manager is waited on, wherever it runs.
pub(super) struct Readiness<'a> {
    pub(super) client: &'a kube::Client,
    pub(super) version: &'a str,
    pub(super) timeout: Duration,
    pub(super) interval: Duration,
    /// The smoke CloneSet's image.
    pub(super) smoke_image: &'a str,
}

/// The smoke CloneSet's image where nodes pull from public registries or do not pull.
pub(super) const SMOKE_IMAGE: &str = "nginx:1.25";

impl Readiness<'_> {
    /// Runs `steps` in order, then a smoke CloneSet, each a [`wait::poll`] within one overall
    /// bound; `alive` is asked on every evaluation, so a manager that exited, restarted or was
    /// denied by its RBAC is reported as such (its own error), not as a timeout.
    pub(super) async fn wait<'b>(
        &self,
        steps: Vec<Step<'b>>,
        alive: impl Fn() -> BoxFuture<'b, Result<(), ControllerError>>,
    ) -> Result<(), ControllerError> {
        let deadline = Instant::now() + self.timeout;
        let smoke_ns = tokio::sync::Mutex::new(None::<String>);
        let dead = std::sync::Mutex::new(None::<ControllerError>);
        let names = steps.iter().map(|(n, _)| *n).chain(["smoke CloneSet"]);
        let mut result = Ok(());
        for (i, name) in names.enumerate() {
            let what = format!("openkruise {} ({name})", self.version);
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = wait::poll(&what, left, self.interval, || async {
                if let Err(e) = alive().await {
                    let text = e.to_string();
                    *dead.lock().expect("not poisoned") = Some(e);
                    return Check::Failed(text);
                }
                let outcome = match steps.get(i) {
                    Some((_, probe)) => probe().await,
                    None => smoke(self.client, self.smoke_image, &mut *smoke_ns.lock().await).await,
                };
                match outcome {
                    Ok(true) => Check::Met,
                    Ok(false) => Check::Pending("not yet".into()),
                    Err(e) => Check::Pending(e),
                }
            })
            .await;
            if let Err(e) = waited {
                result = Err(match dead.lock().expect("not poisoned").take() {
                    Some(typed) => typed,
                    None => ControllerError::Wait(e),
                });
                break;
            }
        }
        if let Some(ns) = smoke_ns.into_inner() {
            let nss: Api<Namespace> = Api::all(self.client.clone());
            let _ = nss.delete(&ns, &DeleteParams::background()).await;
        }
        result
    }
}

/// Creates (once) and checks a one-replica CloneSet: `Ok(true)` once it is admitted and ready.
async fn smoke(
    client: &kube::Client,
    image: &str,
    ns: &mut Option<String>,
) -> Result<bool, String> {
    let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "CloneSet");
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| e.to_string())?;
    let name = match ns {
        Some(n) => n.clone(),
        None => {
            let n = format!("harness-smoke-{:06x}", rand::random::<u32>() & 0xffffff);
            let nss: Api<Namespace> = Api::all(client.clone());
            nss.create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": n}})).expect("valid"),
            )
            .await
            .map_err(|e| e.to_string())?;
            *ns = Some(n.clone());
            n
        }
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &name, &ar);
    // Created (again) until it is admitted: a webhook that is not serving yet refuses it.
    let cs = match api.get("smoke").await {
        Ok(cs) => cs,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            api.create(&PostParams::default(), &smoke_cloneset(image))
                .await
                .map_err(|e| format!("smoke CloneSet refused: {e}"))?;
            return Err("smoke CloneSet created".into());
        }
        Err(e) => return Err(e.to_string()),
    };
    let status = &cs.data["status"];
    let ready = status["readyReplicas"].as_i64() == Some(1)
        && status["observedGeneration"].as_i64() == cs.metadata.generation;
    if ready {
        Ok(true)
    } else {
        Err(format!("smoke CloneSet status {status}"))
    }
}

/// The CloneSet readiness creates: one replica of `image`.
fn smoke_cloneset(image: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "smoke"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "smoke"}},
            "template": {
                "metadata": {"labels": {"app": "smoke"}},
                "spec": {"containers": [{
                    "name": "main",
                    "image": image,
                }]}
            }
        }
    }))
    .expect("valid")
}
