//! A controller's manifests applied to a cluster as its release ships them: [`apply_all`]
//! server-side applies them in install order, replacing what an earlier install left that a
//! merge would get wrong.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::{Condition, conditions};
use serde_json::{Value, json};

use super::ControllerError;
use crate::wait::{self, Check};

/// A manifest's `kind`.
pub fn kind(v: &Value) -> &str {
    v["kind"].as_str().unwrap_or_default()
}

/// Server-side applies one manifest (field manager `harness`, forced).
pub async fn apply(client: &kube::Client, doc: &Value) -> Result<(), ControllerError> {
    let (group, version) = match doc["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split_once('/')
    {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            doc["apiVersion"].as_str().unwrap_or_default().to_string(),
        ),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, kind(doc));
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let what = format!("{} {}", kind(doc), name);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(ControllerError::kube(format!("discover {what}")))?;
    let api: Api<DynamicObject> = match (caps.scope, doc["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        (kube::discovery::Scope::Namespaced, None) => {
            Api::default_namespaced_with(client.clone(), &ar)
        }
        (kube::discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        &name,
        &PatchParams::apply("harness").force(),
        &Patch::Apply(doc),
    )
    .await
    .map_err(ControllerError::kube(format!("apply {what}")))?;
    Ok(())
}

/// On an upgrade, a CRD's conversion webhook still carries the previous manager's `url`; the
/// release's manifest names a `service`, and a CRD may not have both. Swap them before applying.
async fn forget_previous_manager_url(
    crds: &Api<CustomResourceDefinition>,
    doc: &Value,
) -> Result<(), ControllerError> {
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    let service = &doc["spec"]["conversion"]["webhook"]["clientConfig"]["service"];
    if service.is_null() {
        return Ok(());
    }
    let Some(live) = crds
        .get_opt(name)
        .await
        .map_err(ControllerError::kube(format!("read CRD {name}")))?
    else {
        return Ok(());
    };
    let has_url = live
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref())
        .is_some_and(|c| c.url.is_some());
    if has_url {
        let body = json!({"spec": {"conversion": {"webhook": {"clientConfig": {"url": null, "service": service}}}}});
        crds.patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(ControllerError::kube(format!(
                "reset the conversion webhook of CRD {name}"
            )))?;
    }
    Ok(())
}

/// On an upgrade, the webhook configurations carry the previous manager's URLs; the release's
/// own configuration replaces them whole (the new manager points them at itself).
async fn replace_webhook_configuration(
    client: &kube::Client,
    doc: &Value,
) -> Result<(), ControllerError> {
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    let result = match kind(doc) {
        "MutatingWebhookConfiguration" => {
            let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
            api.delete(name, &DeleteParams::default()).await.map(|_| ())
        }
        _ => {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
            api.delete(name, &DeleteParams::default()).await.map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(ControllerError::Kube {
            action: format!("replace {} {name}", kind(doc)),
            source: e,
        }),
    }
}

/// Applies a controller's manifests in the order an install needs: namespaces, then CRDs
/// (waiting until each is established, within `timeout`), then the rest. Over an earlier
/// install (an upgrade), a CRD's conversion webhook and the webhook configurations are
/// replaced rather than merged with the previous manager's.
pub async fn apply_all(
    client: &kube::Client,
    docs: &[Value],
    timeout: Duration,
) -> Result<(), ControllerError> {
    for d in docs.iter().filter(|d| kind(d) == "Namespace") {
        apply(client, d).await?;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = vec![];
    for d in docs
        .iter()
        .filter(|d| kind(d) == "CustomResourceDefinition")
    {
        forget_previous_manager_url(&crds, d).await?;
        apply(client, d).await?;
        names.push(
            d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    for name in &names {
        let what = format!("CRD {name} established");
        wait::until(
            &crds,
            name,
            &what,
            timeout,
            |crd: Option<CustomResourceDefinition>| {
                let established = conditions::is_crd_established().matches_object(crd.as_ref());
                let seen = crd
                    .and_then(|c| c.status)
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .map(|c| format!("{}={}", c.type_, c.status))
                    .collect::<Vec<_>>();
                Box::pin(std::future::ready(Check::when(established, || {
                    format!("conditions {seen:?}")
                })))
            },
        )
        .await?;
    }
    for d in docs
        .iter()
        .filter(|d| !matches!(kind(d), "Namespace" | "CustomResourceDefinition"))
    {
        if matches!(
            kind(d),
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"
        ) {
            replace_webhook_configuration(client, d).await?;
        }
        apply(client, d).await?;
    }
    Ok(())
}
