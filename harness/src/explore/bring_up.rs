//! Bringing up a cell to explore: [`start_cell`] makes it, [`cell`] (start there) prepares the
//! [`Cell`] trials run on, reading what it serves ([`cell_reading`]: its OpenAPI, its CRDs)
//! and the objects references name.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::Value;

use super::exec::Cell;
use super::subject::{self, Subject};
use super::{Options, openapi, schema};
use crate::cluster::any::Provider;
use crate::controller::ControllerRef;
use crate::toolchain::Toolchain;
use crate::up::{ControllerChoice, Session};

/// Reads the subjects' CRDs as the cell serves them: kind → CRD (as JSON).
pub(super) async fn crds(client: &kube::Client) -> anyhow::Result<BTreeMap<String, Value>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut out = BTreeMap::new();
    for c in api.list(&Default::default()).await?.items {
        let key = format!("{}/{}", c.spec.group, c.spec.names.kind);
        out.insert(key, serde_json::to_value(c)?);
    }
    Ok(out)
}

/// `options` with the controller's gates `subjects` need turned on, unless the options set
/// them already (a gate turned off on purpose stays off, and its kinds are skipped).
pub(super) fn with_gates_of(options: &Options, subjects: &[Subject]) -> Options {
    let mut o = options.clone();
    for g in subjects.iter().flat_map(|s| s.gates) {
        o.gates.controller.entry(g.to_string()).or_insert(true);
    }
    o
}

/// Makes a cell for exploration (the scenario layout, the controller at its default gates),
/// named with `prefix`: its name and the session that removes it when dropped.
pub(super) async fn start_cell(
    prefix: &str,
    controller: &ControllerRef,
    options: &Options,
    proxy: bool,
    provider: &Provider,
    toolchain: &Toolchain,
) -> anyhow::Result<(String, Session)> {
    let name = crate::run::new_id(prefix);
    let mut profile = crate::run::scenario_profile(options.kubernetes);
    profile.feature_gates = options.gates.cluster.clone();
    let choice = ControllerChoice {
        reference: controller.clone(),
        gates: options.gates.controller.clone(),
    };
    let start = crate::up::StartOptions { proxy };
    let session =
        Session::start_with(provider, toolchain, &name, &profile, Some(&choice), start).await?;
    Ok((name, session))
}

/// Makes `n` cells for exploration at once, as [`start_cell`] does one: their names and
/// sessions, in order; if one cannot be made, the error of the first that failed (the others
/// are removed).
pub(super) async fn start_cells(
    prefix: &str,
    n: usize,
    controller: &ControllerRef,
    options: &Options,
    proxy: bool,
    provider: &Provider,
    toolchain: &Toolchain,
) -> anyhow::Result<Vec<(String, Session)>> {
    let made = futures::future::join_all(
        (0..n.max(1)).map(|_| start_cell(prefix, controller, options, proxy, provider, toolchain)),
    )
    .await;
    made.into_iter().collect()
}

/// The cell trials run on in `session` (cluster `name`, made by `start_cell` or a test), prepared.
pub async fn cell<'a>(
    name: &str,
    session: &'a Session,
    settle: Duration,
) -> anyhow::Result<Cell<'a>> {
    Ok(cell_reading(name, session, settle).await?.0)
}

/// What each of the cell's nodes offers (its `status.allocatable`), by resource name.
async fn allocatable(client: &kube::Client) -> anyhow::Result<Vec<BTreeMap<String, String>>> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let list = nodes
        .list(&Default::default())
        .await
        .context("list the cell's nodes")?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|n| n.status?.allocatable)
        .map(|a| a.into_iter().map(|(k, q)| (k, q.0)).collect())
        .collect())
}

/// As [`cell`], with what the cell serves: its OpenAPI and its CRDs (see [`crds`]), which
/// [`super::select_served`] derives the subjects from.
pub async fn cell_reading<'a>(
    name: &str,
    session: &'a Session,
    settle: Duration,
) -> anyhow::Result<(Cell<'a>, openapi::Doc, BTreeMap<String, Value>)> {
    let client = session.cluster.client().await?;
    let doc = openapi::fetch(&client)
        .await
        .context("read the cell's OpenAPI")?;
    let crds = crds(&client).await?;
    let mut doc = doc;
    doc.offer(&allocatable(&client).await?);
    // An object the API refuses (a required field its schema cannot say how to fill) is not
    // made: a reference to its kind is then a string as any other.
    for r in references(&doc, &crds) {
        if let Err(e) = dry_make(&client, &r).await {
            tracing::info!("not made for references: {e:#}");
            doc.unmade(r.object["kind"].as_str().unwrap_or_default());
        }
    }
    let cell = Cell {
        client,
        installation: session
            .installation
            .as_ref()
            .context("the controller was not installed")?,
        cluster: Some(&session.cluster),
        owner: name.to_string(),
        settle,
        made: Default::default(),
        references: references(&doc, &crds),
        unsettled: Default::default(),
    };
    cell.prepare().await?;
    Ok((cell, doc, crds))
}

/// Whether the API admits the object `r` (a dry run, in the namespace `default` for a
/// namespaced kind).
pub(super) async fn dry_make(client: &kube::Client, r: &openapi::Made) -> anyhow::Result<()> {
    let (api_version, kind) = (
        r.object["apiVersion"].as_str().unwrap_or_default(),
        r.object["kind"].as_str().unwrap_or_default(),
    );
    let (ar, _) = crate::scenario::pinned(client, api_version, kind).await?;
    let api: Api<kube::api::DynamicObject> = match r.namespaced {
        true => Api::namespaced_with(client.clone(), "default", &ar),
        false => Api::all_with(client.clone(), &ar),
    };
    let o: kube::api::DynamicObject = serde_json::from_value(r.object.clone())?;
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, &o).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(anyhow::anyhow!("{kind} {}: {e}", openapi::REFERENCED)),
    }
}

/// The objects the references among every subject's leaves name, made by the cell
/// ([`openapi::Doc::referenced`]), a kind each.
pub(super) fn references(doc: &openapi::Doc, crds: &BTreeMap<String, Value>) -> Vec<openapi::Made> {
    let mut kinds = std::collections::BTreeSet::new();
    let mut walked = std::collections::BTreeSet::new();
    for s in subject::served(crds, doc) {
        // A policy's own leaves are the same over every target, and its target's template is
        // a pod template as the first one walked: the references they name are the same.
        if !walked.insert((s.api_version.clone(), s.kind, s.template.clone())) {
            continue;
        }
        let group = s.api_version.split('/').next().unwrap_or_default();
        let Some(crd) = crds.get(&format!("{group}/{}", s.kind)) else {
            continue;
        };
        let version = s.api_version.rsplit('/').next().unwrap_or_default();
        let seed = s.seed.make("x");
        let walk = schema::Walk {
            doc: Some(doc),
            template: &s.template,
            seed: &seed,
            pod: &Value::Null,
        };
        let mut leaves = schema::leaves_with(crd, version, &walk);
        if let Some(t) = &s.target {
            leaves.extend(schema::template_leaves(doc, &t.template, &t.seed.make("x")));
        }
        for l in leaves {
            if let schema::Shape::Reference(k) = l.shape {
                kinds.insert(k);
            }
        }
    }
    kinds
        .iter()
        .filter_map(|k| doc.served(k))
        .filter_map(|k| doc.referenced(k))
        .collect()
}
