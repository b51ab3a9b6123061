//! A behaviour trial's semantic operations: [`Cell::operate`] patches the object as a person
//! would roll it out, recreate, scale or reselect its pods.

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

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
            Op::Rollout | Op::Recreate => {
                let mut containers = get(&obj, t)["spec"]["containers"].clone();
                // A template an earlier step left without a container: nothing to roll out.
                if !change_first(&mut containers, op) {
                    return Ok(());
                }
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
            Op::Rewrite | Op::Retag | Op::AddNamespace | Op::Relabel => {
                anyhow::bail!(
                    "{op:?} applies to a kind that copies a resource, not to {}",
                    s.kind
                )
            }
            Op::RolloutDeclared | Op::RecreateDeclared => {
                anyhow::bail!(
                    "{op:?} changes what a policy declares, not its target {}",
                    s.kind
                )
            }
        }
        merge(api, name, &patch).await
    }

    /// A rollout or recreate of a policy's target changes what the policy declares to put
    /// into pods too, when it declares containers (`spec.containers`): the first one changed
    /// as the target's first container is ([`change_first`]). Whether it did.
    pub(super) async fn operate_declared(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        op: Op,
    ) -> anyhow::Result<bool> {
        if !matches!(op, Op::Rollout | Op::Recreate) {
            return Ok(false);
        }
        let obj = serde_json::to_value(api.get(name).await?)?;
        let mut containers = obj["spec"]["containers"].clone();
        if !change_first(&mut containers, op) {
            return Ok(false);
        }
        merge(api, name, &json!({"spec": {"containers": containers}})).await?;
        Ok(true)
    }
}

/// The first of `containers` changed as `op` changes a template: another image (a rollout),
/// or one more environment variable, which no in-place update carries (a recreate). Whether
/// it changed one: not without a first container (a list an update emptied, or none), nor for
/// another operation.
fn change_first(containers: &mut Value, op: Op) -> bool {
    if containers.as_array().is_none_or(Vec::is_empty) {
        return false;
    }
    match op {
        Op::Rollout => {
            let image = match containers[0]["image"] == IMAGE_V2 {
                true => subject::IMAGE_V1,
                false => IMAGE_V2,
            };
            containers[0]["image"] = json!(image);
        }
        Op::Recreate => {
            let mut env = containers[0]["env"].as_array().cloned().unwrap_or_default();
            env.push(json!({"name": format!("EXPLORE_{}", env.len()), "value": "1"}));
            containers[0]["env"] = json!(env);
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::change_first;
    use crate::explore::subject::{IMAGE_V1, IMAGE_V2};
    use crate::explore::trial::Op;

    #[test]
    fn a_rollout_swaps_the_first_image_and_a_recreate_adds_a_variable() {
        let mut c = json!([{"name": "a", "image": IMAGE_V1}, {"name": "b", "image": "x"}]);
        assert!(change_first(&mut c, Op::Rollout));
        assert_eq!(c[0]["image"], IMAGE_V2);
        change_first(&mut c, Op::Rollout);
        assert_eq!(c[0]["image"], IMAGE_V1);
        change_first(&mut c, Op::Recreate);
        change_first(&mut c, Op::Recreate);
        assert_eq!(
            c[0]["env"],
            json!([{"name": "EXPLORE_0", "value": "1"}, {"name": "EXPLORE_1", "value": "1"}])
        );
        assert_eq!(c[1], json!({"name": "b", "image": "x"}), "only the first");
        let before = c.clone();
        assert!(!change_first(&mut c, Op::ScaleUp));
        assert_eq!(c, before);
    }

    #[test]
    fn a_template_without_a_container_is_left_as_it_is() {
        for mut none in [json!([]), json!(null)] {
            let before = none.clone();
            assert!(!change_first(&mut none, Op::Rollout));
            assert!(!change_first(&mut none, Op::Recreate));
            assert_eq!(none, before);
        }
        let mut one = json!([{"name": "a", "image": IMAGE_V1}]);
        assert!(change_first(&mut one, Op::Rollout));
    }
}
