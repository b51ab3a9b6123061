//! A behaviour trial's semantic operations: [`Cell::operate`] patches the object as a person
//! would roll it out, recreate, scale or reselect its pods.

use kube::api::{Api, DynamicObject};
use serde_json::json;

use super::{Cell, merge};
use crate::explore::subject::{self, IMAGE_V2, Makes, Subject, get, set};
use crate::explore::trial::Op;

impl Cell<'_> {
    pub(super) async fn operate(
        &self,
        s: &Subject,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
        op: Op,
    ) -> anyhow::Result<()> {
        if s.makes == Makes::Copies {
            return self.operate_copies(api, ns, name, op).await;
        }
        let obj = serde_json::to_value(api.get(name).await?)?;
        let mut patch = json!({});
        let t = s.template.as_str();
        match op {
            Op::Rollout => {
                let image = if get(&obj, t)["spec"]["containers"][0]["image"] == IMAGE_V2 {
                    subject::IMAGE_V1
                } else {
                    IMAGE_V2
                };
                let mut containers = get(&obj, t)["spec"]["containers"].clone();
                containers[0]["image"] = json!(image);
                set(&mut patch, &format!("{t}.spec.containers"), containers)
                    .map_err(anyhow::Error::msg)?;
            }
            Op::Recreate => {
                let mut containers = get(&obj, t)["spec"]["containers"].clone();
                let n = containers[0]["env"].as_array().map_or(0, Vec::len);
                let mut env = containers[0]["env"].as_array().cloned().unwrap_or_default();
                env.push(json!({"name": format!("EXPLORE_{n}"), "value": "1"}));
                containers[0]["env"] = json!(env);
                set(&mut patch, &format!("{t}.spec.containers"), containers)
                    .map_err(anyhow::Error::msg)?;
            }
            Op::ScaleUp | Op::ScaleDown => {
                let n = obj["spec"]["replicas"].as_i64().unwrap_or(1);
                let n = if op == Op::ScaleUp {
                    n + 1
                } else {
                    (n - 1).max(0)
                };
                patch = json!({"spec": {"replicas": n}});
            }
            Op::ChangeSelector => {
                let labels = json!({"app": name, "generation": "2"});
                set(&mut patch, &format!("{t}.metadata.labels"), labels.clone())
                    .map_err(anyhow::Error::msg)?;
                set(&mut patch, "spec.selector", json!({"matchLabels": labels}))
                    .map_err(anyhow::Error::msg)?;
            }
            Op::Rewrite | Op::AddNamespace | Op::Relabel => {
                anyhow::bail!(
                    "{op:?} applies to a kind that copies a resource, not to {}",
                    s.kind
                )
            }
        }
        merge(api, name, &patch).await
    }
}
