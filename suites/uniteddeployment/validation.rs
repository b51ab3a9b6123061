//! What a UnitedDeployment's webhook admits of each template kind: a pod template the
//! workload of that kind refuses must be refused in the UnitedDeployment too, or every subset
//! it makes is refused by that workload's own admission, forever. A template the workload
//! admits asks nothing of the UnitedDeployment.

use anyhow::{bail, ensure};
use futures::FutureExt;
use serde_json::{Value, json};

use super::{API, Template, UD, united};
use crate::scenario::{Ctx, FINDING, Scenario};
use crate::suites::common::*;

/// The scenarios of this file.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "uniteddeployment/every-template-kind-refuses-a-pod-template-its-workload-refuses",
        "a pod template naming an operating system the API does not know is refused in a UnitedDeployment of each template kind whose workload refuses it (the control), through each API version the CRD serves; the same template on linux is admitted",
        &["uniteddeployment", "api-versions", "validation", "webhook"],
        |ctx| pod_template(ctx).boxed(),
    )]
}

/// Every template kind a UnitedDeployment offers.
const KINDS: [Template; 4] = [
    Template::CloneSet,
    Template::StatefulSet,
    Template::AdvancedStatefulSet,
    Template::Deployment,
];

/// The workload of kind `t` on its own, its pods on the operating system `os`.
fn workload(t: Template, os: &str) -> Value {
    let (_, mut spec) = t.field_and_spec();
    spec["replicas"] = json!(1);
    spec["template"]["spec"]["os"] = json!({"name": os});
    let r = t.api_resource();
    json!({"apiVersion": r.api_version, "kind": r.kind, "metadata": {"name": UD}, "spec": spec})
}

/// A UnitedDeployment through `version` of template kind `t`, its pods on `os`.
fn unit(t: Template, version: &str, os: &str) -> Value {
    let (field, _) = t.field_and_spec();
    let mut ud = united(t, 2, json!({}), json!({}));
    ud["apiVersion"] = json!(API.replace("v1alpha1", version));
    ud["spec"]["template"][field]["spec"]["template"]["spec"]["os"] = json!({"name": os});
    ud
}

async fn pod_template(ctx: Ctx) -> anyhow::Result<()> {
    const UNKNOWN: &str = "not-an-os";
    // A kind whose own admission lets the template through (a StatefulSet does not validate
    // its pod spec: its pods are refused instead) asks nothing of the UnitedDeployment.
    let mut controls = vec![];
    for t in KINDS {
        let kind = t.api_resource().kind;
        let answer = ctx
            .step(&format!("a {kind}'s answer (the control)"), async {
                ctx.admits(&workload(t, "linux")).await.map_err(refusal)?;
                Ok(ctx
                    .admits(&workload(t, UNKNOWN))
                    .await
                    .err()
                    .map(|e| refusal(e).to_string()))
            })
            .await?;
        controls.extend(answer.map(|refused| (t, refused)));
    }
    ensure!(
        !controls.is_empty(),
        "the control: no workload kind refuses pods that name os {UNKNOWN}"
    );
    let versions = ctx
        .step(
            "the versions the CRD serves",
            served_versions(&ctx, "uniteddeployments.apps.kruise.io"),
        )
        .await?;
    let mut findings = vec![];
    for version in &versions {
        for (t, control) in &controls {
            let (field, _) = t.field_and_spec();
            ctx.step(&format!("{version} {field}"), async {
                if let Err(e) = ctx.admits(&unit(*t, version, "linux")).await {
                    bail!(
                        "a UnitedDeployment through {version} with a valid {field} refused: {}",
                        refusal(e)
                    );
                }
                if ctx.admits(&unit(*t, version, UNKNOWN)).await.is_ok() {
                    findings.push(format!(
                        "{FINDING}pod-template-unvalidated: UnitedDeployment admitted through apps.kruise.io/{version} with a {field} whose pods name os {UNKNOWN}, which the workload refuses ({control}); every subset it would make is refused"
                    ));
                }
                Ok(())
            })
            .await?;
        }
    }
    ensure!(findings.is_empty(), "{}", findings.join("\n"));
    Ok(())
}
