//! The in-cluster install (kind, k3s): the release's manifests and Deployment, waited on until
//! rolled out ([`install_in_cluster`]); and the check of an install the harness did not make
//! (existing clusters, [`verify_installed`]).

use super::*;

/// Installs OpenKruise into a cluster with real nodes (kind, k3s) as the release ships it: its
/// manifests with the manager Deployment and the daemon DaemonSet on the release image
/// ([`in_cluster_manifests`]),
/// then waits for the rollout, webhook CA bundles, and a smoke CloneSet.
pub async fn install_in_cluster(
    client: &kube::Client,
    toolchain: &Toolchain,
    options: &InstallOptions,
) -> Result<crate::controller::InClusterManager, ControllerError> {
    let tag = options.tag();
    let timeout = options.timeout.unwrap_or(Duration::from_secs(300));
    if let Some(dir) = &options.checkout {
        return Err(ControllerError::NotInstalled {
            detail: format!(
                "a checkout ({}) runs on the local provider only: on kind and k3s the manager \
                 runs from the release image",
                dir.display()
            ),
        });
    }
    let kubectl = toolchain
        .kubernetes(crate::toolchain::KubeVersion::default_version())
        .await?
        .path("kubectl");
    // Every node of an in-cluster install is real: the release's daemon runs on each.
    let gates = manager_gates_for(&options.gates, true);
    let mut docs = in_cluster_manifests(render_for(&kubectl, &tag, options).await?, &tag, &gates);
    if let Some(t) = options.transform {
        t(&mut docs);
    }
    apply_all(client, &docs, timeout).await?;
    let manager = crate::controller::InClusterManager {
        name: BINARY.into(),
        version: tag,
        namespace: NAMESPACE.into(),
        selector: "control-plane=controller-manager".into(),
        gates,
        client: client.clone(),
    };
    wait_in_cluster(client, &manager, timeout).await?;
    Ok(manager)
}

/// Uses the OpenKruise already installed in an existing cluster: its manager Deployment must
/// run the release the run asked for (`options.version`); nothing is installed or changed.
pub async fn verify_installed(
    client: &kube::Client,
    options: &InstallOptions,
) -> Result<crate::controller::InClusterManager, ControllerError> {
    let tag = options.tag();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), NAMESPACE);
    let d = deployments
        .get_opt("kruise-controller-manager")
        .await
        .map_err(ControllerError::kube(
            "read kruise-system/kruise-controller-manager",
        ))?
        .ok_or_else(|| ControllerError::NotInstalled {
            detail: "there is no Deployment kruise-system/kruise-controller-manager; install the \
                     release first (the existing provider never installs into a cluster it did \
                     not create)"
                .into(),
        })?;
    let image = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.iter().find(|c| c.name == "manager"))
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let running = image.rsplit(':').next().unwrap_or_default();
    if running != tag {
        return Err(ControllerError::NotInstalled {
            detail: format!(
                "the cluster runs {image}, not {tag}; pass --controller openkruise@{running} or \
                 install {tag}"
            ),
        });
    }
    let manager = crate::controller::InClusterManager {
        name: BINARY.into(),
        version: tag,
        namespace: NAMESPACE.into(),
        selector: "control-plane=controller-manager".into(),
        gates: BTreeMap::new(),
        client: client.clone(),
    };
    wait_in_cluster(
        client,
        &manager,
        options.timeout.unwrap_or(Duration::from_secs(120)),
    )
    .await?;
    Ok(manager)
}

/// Whether every webhook of both configurations has a CA bundle (the in-cluster manager
/// writes them itself).
pub async fn webhooks_have_ca(client: &kube::Client) -> Result<(), String> {
    for (name, cc) in webhook_client_configs(client).await? {
        if cc.ca_bundle.as_ref().is_none_or(|b| b.0.is_empty()) {
            return Err(format!("webhook {name} has no caBundle yet"));
        }
    }
    Ok(())
}

/// Every webhook of the release's two webhook configurations, with its client config.
pub(super) async fn webhook_client_configs(
    client: &kube::Client,
) -> Result<Vec<(String, WebhookClientConfig)>, String> {
    let mwc: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let vwc: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let m = mwc
        .get(MUTATING_WEBHOOKS)
        .await
        .map_err(|e| e.to_string())?;
    let v = vwc
        .get(VALIDATING_WEBHOOKS)
        .await
        .map_err(|e| e.to_string())?;
    Ok(m.webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| (w.name, w.client_config))
        .chain(
            v.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config)),
        )
        .collect())
}

async fn wait_in_cluster(
    client: &kube::Client,
    manager: &crate::controller::InClusterManager,
    timeout: Duration,
) -> Result<(), ControllerError> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), NAMESPACE);
    let deployments = &deployments;
    let steps: Vec<Step<'_>> = vec![
        (
            "manager rollout",
            Box::new(move || {
                async move {
                    let d = deployments
                        .get("kruise-controller-manager")
                        .await
                        .map_err(|e| e.to_string())?;
                    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    let s = d.status.unwrap_or_default();
                    if s.observed_generation >= d.metadata.generation
                        && s.updated_replicas == Some(want)
                        && s.available_replicas == Some(want)
                    {
                        Ok(true)
                    } else {
                        Err(format!(
                            "updated {:?} available {:?} of {want}",
                            s.updated_replicas, s.available_replicas
                        ))
                    }
                }
                .boxed()
            }),
        ),
        (
            "webhook configurations",
            Box::new(move || webhooks_have_ca(client).map_ok(|_| true).boxed()),
        ),
    ];
    let ready = Readiness {
        client,
        version: &manager.version,
        timeout,
        interval: Duration::from_millis(500),
        smoke_image: SMOKE_IMAGE,
    };
    let whole = crate::controller::Window::all();
    ready.wait(steps, || manager.check(&whole).boxed()).await
}
