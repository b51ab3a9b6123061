//! Pods and objects as the lifecycle suites read them: [`wait_pods`], the wait over a workload
//! and its pods every such suite shares, the small readers of a pod (its name, a label,
//! readiness, revision) and of a status (a count, a text, whether the controller observed the
//! latest generation), the versions a CRD serves ([`served_versions`]), and [`merge`], the JSON merge the suites build manifests with.

use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use serde_json::Value;

use crate::scenario::wait::{Check, until};
use crate::scenario::{Ctx, status};

/// Waits until `check` holds over the object `name` of `api` and the live pods of the
/// scenario's namespace matching `selector` (listed on every change and every second).
pub async fn wait_pods<F>(
    ctx: &Ctx,
    api: &Api<DynamicObject>,
    name: &str,
    selector: &str,
    what: &str,
    check: F,
) -> anyhow::Result<DynamicObject>
where
    F: Fn(&DynamicObject, &[Pod]) -> Check + Clone + Send + Sync + 'static,
{
    let pods_api: Api<Pod> = ctx.api();
    let selector = selector.to_string();
    let found = until(api, name, what, ctx.timeouts.converge, move |o| {
        let (pods_api, selector, check) = (pods_api.clone(), selector.clone(), check.clone());
        async move {
            let Some(o) = o else {
                return Check::Pending("absent".into());
            };
            match pods_api
                .list(&ListParams::default().labels(&selector))
                .await
            {
                Ok(l) => {
                    let live: Vec<Pod> = l
                        .items
                        .into_iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .collect();
                    check(&o, &live)
                }
                Err(e) => Check::Failed(format!("list pods: {e}")),
            }
        }
        .boxed()
    })
    .await?;
    found.ok_or_else(|| anyhow::anyhow!("{name} vanished"))
}

/// Waits until exactly `want` ControllerRevisions are owned by the object `name` of `api`.
pub async fn wait_owned_revisions(
    ctx: &Ctx,
    api: &Api<DynamicObject>,
    name: &str,
    want: usize,
) -> anyhow::Result<()> {
    let uid = api.get(name).await?.metadata.uid.unwrap_or_default();
    let revs = ctx.dyn_api("apps/v1", "ControllerRevision").await?;
    let what = format!("{want} ControllerRevisions owned by {name}");
    until(api, name, &what, ctx.timeouts.converge, move |_| {
        let (revs, uid) = (revs.clone(), uid.clone());
        async move {
            match revs.list(&ListParams::default()).await {
                Ok(l) => {
                    let owned: Vec<String> = l
                        .items
                        .iter()
                        .filter(|r| {
                            r.metadata
                                .owner_references
                                .iter()
                                .flatten()
                                .any(|o| o.uid == uid)
                        })
                        .filter_map(|r| r.metadata.name.clone())
                        .collect();
                    Check::when(owned.len() == want, || {
                        format!("owned revisions {owned:?}, want {want}")
                    })
                }
                Err(e) => Check::Failed(format!("list ControllerRevisions: {e}")),
            }
        }
        .boxed()
    })
    .await?;
    Ok(())
}

/// A pod's name.
pub fn name_of(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// A pod label.
pub fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Whether the pod's Ready condition is True.
pub fn ready(p: &Pod) -> bool {
    ready_since(p).is_some()
}

/// When the pod's Ready condition last turned True, in Unix seconds (None if it is not ready).
pub fn ready_since(p: &Pod) -> Option<i64> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(0, |t| t.0.as_second())
        })
}

/// The number of `pods` whose `controller-revision-hash` is `revision`.
pub fn at_revision(pods: &[Pod], revision: &str) -> usize {
    pods.iter()
        .filter(|p| label(p, "controller-revision-hash") == Some(revision))
        .count()
}

/// A status field as an integer (0 when absent).
pub fn count(o: &DynamicObject, field: &str) -> i64 {
    status(o)[field].as_i64().unwrap_or(0)
}

/// A status field as a string ("" when absent).
pub fn text(o: &DynamicObject, field: &str) -> String {
    status(o)[field].as_str().unwrap_or_default().to_string()
}

/// Whether the controller has observed the object's latest generation.
pub fn observed(o: &DynamicObject) -> bool {
    status(o)["observedGeneration"].as_i64() >= o.metadata.generation
}

/// The API versions the CustomResourceDefinition `crd` (its name, `plural.group`) serves; an
/// error when it serves none.
pub async fn served_versions(ctx: &Ctx, crd: &str) -> anyhow::Result<Vec<String>> {
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(ctx.client.clone());
    let crd_value = serde_json::to_value(crds.get(crd).await?)?;
    let served: Vec<String> = crd_value["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == Value::Bool(true))
        .filter_map(|v| v["name"].as_str().map(String::from))
        .collect();
    anyhow::ensure!(!served.is_empty(), "the CRD {crd} serves no version");
    Ok(served)
}

/// JSON merge of `patch` into `target` (objects merge, everything else replaces).
pub fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_joins_objects_and_replaces_the_rest() {
        let mut spec = json!({"updateStrategy": {"type": "ReCreate"}, "replicas": 1});
        merge(
            &mut spec,
            json!({"updateStrategy": {"partition": "50%"}, "replicas": 3}),
        );
        assert_eq!(
            spec,
            json!({"updateStrategy": {"type": "ReCreate", "partition": "50%"}, "replicas": 3})
        );
    }

    #[test]
    fn pods_are_counted_by_revision_label() {
        let pod = |rev: &str| -> Pod {
            serde_json::from_value(
                json!({"metadata": {"labels": {"controller-revision-hash": rev}}}),
            )
            .expect("a pod")
        };
        let pods = [pod("a"), pod("b"), pod("b")];
        assert_eq!(at_revision(&pods, "b"), 2);
        assert_eq!(at_revision(&pods, "c"), 0);
    }
}
