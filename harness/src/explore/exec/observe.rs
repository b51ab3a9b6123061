//! What a behaviour trial's object has become, read from the cell: [`Cell::differences`]
//! (start there) from the declared state, with the pods and revisions it owns and its live
//! pods.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::{Cell, Settling, Side, api_for};
use crate::explore::oracle::{self, PodView};
use crate::explore::subject::{self, Makes, Subject};

/// How long what a workload owns must stay the same for a settle step to end.
pub const QUIET: Duration = Duration::from_secs(2);

impl Cell<'_> {
    /// The live pods of object `name` of `s` (0 when it cannot be read).
    pub(super) async fn live(
        &self,
        s: &Subject,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
    ) -> usize {
        if s.makes == Makes::Copies {
            return self.live_copies(api, name).await;
        }
        let Ok(o) = api.get(name).await else {
            return 0;
        };
        let uid = o.metadata.uid.unwrap_or_default();
        self.pods(ns, &uid, &s.via)
            .await
            .map(|p| live(&p).len())
            .unwrap_or(0)
    }

    /// A settle step ([`crate::explore::trial::Step::Settle`]) on `side`: waits until the
    /// controller has observed its workload's last change (`status.observedGeneration`, for a
    /// kind that keeps one) and what the workload owns (its pods' names and versions; a kind
    /// that copies, the object and its copies in live namespaces) has not changed for
    /// [`QUIET`], within the settle bound (as `settling` bounds it); as `settling` allows,
    /// also once the controller has not observed it, as a trial of the subject's kind already
    /// reported ([`Cell::unsettled_of`]), and nothing the workload owns changed for
    /// [`super::KNOWN_QUIET`]. Its line says which came first.
    pub(super) async fn quiet(&self, side: &Side, ns: &str, settling: Settling) -> String {
        let (w, api, name) = (&side.workload, &side.wapi, side.wname.as_str());
        let unobserved = self
            .unsettled_of(&side.subject, settling)
            .contains(&oracle::convergence_key(oracle::UNOBSERVED));
        let bound = settling.bound(self.settle);
        let started = Instant::now();
        let (mut last, mut since) = (None, Instant::now());
        loop {
            let now = match api.get(name).await {
                Ok(o) => {
                    let o = serde_json::to_value(&o).unwrap_or_default();
                    let observed = !w.observes_generation
                        || o["status"]["observedGeneration"].as_i64()
                            >= o["metadata"]["generation"].as_i64();
                    let owned = match w.makes {
                        Makes::Pods => {
                            let uid = o["metadata"]["uid"].as_str().unwrap_or_default();
                            let mut pods: Vec<(String, String)> = self
                                .pods(ns, uid, &w.via)
                                .await
                                .unwrap_or_default()
                                .into_iter()
                                .map(|p| {
                                    let m = p.metadata;
                                    (
                                        m.name.unwrap_or_default(),
                                        m.resource_version.unwrap_or_default(),
                                    )
                                })
                                .collect();
                            pods.sort();
                            pods
                        }
                        Makes::Copies => {
                            let mut owned = self.copy_versions(&o).await;
                            owned.push((
                                name.to_string(),
                                o["metadata"]["resourceVersion"].to_string(),
                            ));
                            owned
                        }
                    };
                    Some((observed, owned))
                }
                Err(_) => None,
            };
            if now != last {
                (last, since) = (now, Instant::now());
            }
            if let Some((true, _)) = &last
                && since.elapsed() >= QUIET
            {
                return format!("settled in {:.1} s", started.elapsed().as_secs_f64());
            }
            if let Some((false, _)) = &last
                && unobserved
                && since.elapsed() >= super::KNOWN_QUIET
            {
                return format!(
                    "not observed after {:.1} s, as trials of {} reported, and nothing changed \
                     for {:?}: the next step goes on",
                    started.elapsed().as_secs_f64(),
                    side.subject.family,
                    super::KNOWN_QUIET
                );
            }
            if started.elapsed() >= bound {
                return format!("not settled within {bound:?}: the next step goes on");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Whether the object's spec holds its updates now ([`oracle::holds_updates`], with the
    /// settle bound); false when it cannot be read.
    pub(super) async fn holds_updates(&self, api: &Api<DynamicObject>, name: &str) -> bool {
        api.get(name).await.is_ok_and(|o| {
            oracle::holds_updates(
                &serde_json::to_value(&o).unwrap_or_default()["spec"],
                self.settle.as_secs() as i64,
            )
        })
    }

    /// What differs from the declared state now ([`oracle::convergence`], the revision history
    /// it keeps, and, once a trial's update `changed` its claim templates, the claims of its
    /// pods: [`oracle::claims_follow`]).
    pub(super) async fn differences(
        &self,
        s: &Subject,
        api: &Api<DynamicObject>,
        ns: &str,
        name: &str,
        changed: Option<&oracle::ClaimsChanged>,
        policy: Option<&Value>,
    ) -> Vec<String> {
        if s.makes == Makes::Copies {
            return self.copy_differences(api, ns, name).await;
        }
        let obj = match api.get(name).await {
            Ok(o) => serde_json::to_value(o).unwrap_or_default(),
            // Gone by its own controller (a finished job's TTL): nothing left to converge.
            Err(kube::Error::Api(e)) if e.code == 404 => return vec![],
            Err(e) => return vec![format!("get {name}: {e}")],
        };
        let uid = obj["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let pods = match self.pods(ns, &uid, &s.via).await {
            Ok(p) => p,
            Err(e) => return vec![format!("list pods: {e:#}")],
        };
        let revisions = match self.revisions(ns, &uid).await {
            Ok(r) => r,
            Err(e) => return vec![format!("list revisions: {e:#}")],
        };
        // The template's first container, found on a pod by its name: a policy may put
        // containers of its own before it.
        let first = subject::get(&obj, &format!("{}.spec.containers[0].name", s.template))
            .as_str()
            .map(String::from);
        let live = live(&pods);
        let views: Vec<PodView> = live
            .iter()
            .map(|p| PodView {
                name: p.metadata.name.clone().unwrap_or_default(),
                image: p
                    .spec
                    .as_ref()
                    .and_then(|s| {
                        s.containers
                            .iter()
                            .find(|c| Some(&c.name) == first.as_ref())
                            .or(s.containers.first())
                    })
                    .and_then(|c| c.image.clone())
                    .unwrap_or_default(),
                labels: p.metadata.labels.clone().unwrap_or_default(),
            })
            .collect();
        // What a policy over the workload declares for that container (a patch of its pods).
        let declared = match (policy, &first) {
            (Some(p), Some(c)) => oracle::convergence::declared_images(p, c),
            _ => vec![],
        };
        let mut out = oracle::convergence(s, &obj, &views, &declared, self.settle.as_secs() as i64);
        out.extend(oracle::revision_history(&obj, &revisions));
        if let Some(changed) = changed
            && s.via.is_empty()
        {
            match self.claims(ns).await {
                Ok(claims) => out.extend(oracle::claims_follow(
                    subject::get(&obj, subject::parent(&s.template)),
                    &subject::claims_at(&s.template),
                    changed,
                    &revisions,
                    &claimed(&live),
                    &claims,
                )),
                Err(e) => out.push(format!("list claims: {e:#}")),
            }
        }
        out
    }

    /// The claims of namespace `ns`, by name.
    async fn claims(&self, ns: &str) -> anyhow::Result<std::collections::BTreeMap<String, Value>> {
        use k8s_openapi::api::core::v1::PersistentVolumeClaim;
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|c| {
                let name = c.metadata.name.clone()?;
                Some((name, serde_json::to_value(c).ok()?))
            })
            .collect())
    }

    /// What the pods of workload `name` of `s` are now, for the rule on claims: each live
    /// pod's revision by UID and the newest revision number (none when they cannot be read, or
    /// its pods are not its own).
    pub(super) async fn claims_snapshot(
        &self,
        s: &Subject,
        api: &Api<DynamicObject>,
        name: &str,
        ns: &str,
    ) -> Option<oracle::ClaimsChanged> {
        if !s.via.is_empty() {
            return None;
        }
        let uid = api.get(name).await.ok()?.metadata.uid?;
        let pods = self.pods(ns, &uid, &s.via).await.ok()?;
        let revisions = self.revisions(ns, &uid).await.ok()?;
        Some(oracle::ClaimsChanged {
            pods: claimed(&live(&pods))
                .into_iter()
                .map(|p| (p.uid, p.revision))
                .collect(),
            newest: revisions.iter().map(|(_, n)| *n).max().unwrap_or(0),
        })
    }

    /// What a policy that declares containers to put into pods (`spec.containers` or
    /// `spec.initContainers`) has not got into the pods of namespace `ns` it selects
    /// ([`oracle::injection::injection`]); nothing for a policy that declares none.
    pub(super) async fn injection_differences(&self, policy: &Value, ns: &str) -> Vec<String> {
        let declares = ["containers", "initContainers"]
            .iter()
            .any(|k| policy["spec"][k].as_array().is_some_and(|c| !c.is_empty()));
        if !declares {
            return vec![];
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let pods: Vec<Value> = match pods.list(&ListParams::default()).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .collect(),
            Err(e) => return vec![format!("list pods: {e}")],
        };
        let namespaces = match self.namespaces().await {
            Ok(n) => n,
            Err(e) => return vec![format!("list namespaces: {e:#}")],
        };
        oracle::injection::injection(policy, &pods, &namespaces)
    }

    /// The pods `uid` owns, itself or through objects of the kinds `via` (from the top).
    pub(super) async fn pods(
        &self,
        ns: &str,
        uid: &str,
        via: &[subject::Kind],
    ) -> anyhow::Result<Vec<Pod>> {
        let lp = ListParams::default();
        let mut owners: Vec<String> = vec![uid.to_string()];
        let owned_by = |m: &kube::api::ObjectMeta, owners: &[String]| {
            m.owner_references
                .iter()
                .flatten()
                .any(|o| owners.contains(&o.uid))
        };
        for (api_version, kind) in via {
            let api = api_for(&self.client, ns, api_version, kind).await?;
            let found: Vec<String> = api
                .list(&lp)
                .await?
                .items
                .into_iter()
                .filter(|o| owned_by(&o.metadata, &owners))
                .filter_map(|o| o.metadata.uid)
                .collect();
            owners.extend(found);
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        Ok(pods
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|p| owned_by(&p.metadata, &owners))
            .collect())
    }

    /// The ControllerRevisions `uid` owns: (name, revision number).
    pub(super) async fn revisions(
        &self,
        ns: &str,
        uid: &str,
    ) -> anyhow::Result<Vec<(String, i64)>> {
        use k8s_openapi::api::apps::v1::ControllerRevision;
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .map(|r| (r.metadata.name.unwrap_or_default(), r.revision))
            .collect())
    }
}

/// The pods of `pods` not being deleted.
fn live(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// The pods as the rule on claims sees them.
fn claimed(pods: &[&Pod]) -> Vec<oracle::ClaimedPod> {
    pods.iter()
        .map(|p| oracle::ClaimedPod {
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            revision: p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(oracle::claims::REVISION_LABEL))
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}
