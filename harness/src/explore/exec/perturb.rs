//! A behaviour trial's perturbations: [`Cell::perturb`] (start there) acts on the controller
//! (restarted, its watches held, dropped or closed), the apiserver, the pods or their nodes;
//! [`Cell::undo`] undoes what they leave.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::{Cell, Side, Undo, resource};
use crate::explore::subject::{Subject, get};
use crate::explore::trial::{Perturbation, Watched, Which};
use crate::scenario::monitor;
use crate::wait::{Check, poll};

impl Cell<'_> {
    /// Undoes what a trial's perturbations left: releases the manager's held events,
    /// uncordons the nodes and has silenced kubelets report again (the next trial starts on a
    /// whole cluster). A failure is logged: what is left shows in the next trials' findings.
    pub(super) async fn undo(&self, undo: Undo) {
        if let Some(proxy) = self.installation.proxy() {
            for resource in &undo.stale {
                proxy.release(resource);
            }
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        for node in undo.cordoned {
            let patch = json!({"spec": {"unschedulable": null}});
            if let Err(e) = nodes
                .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!("uncordon {node}: {e}");
            }
        }
        if let Some(cluster) = self.cluster {
            for node in undo.silenced {
                if let Err(e) = cluster.resume_node(&node).await {
                    tracing::warn!("have {node} report again: {e:#}");
                }
            }
        }
    }

    /// Waits (up to 30 s) until the node controller has marked not ready every live pod of
    /// the subject (its object's `uid`) on silent node `node`: what it saw.
    pub(super) async fn unready_on(
        &self,
        ns: &str,
        uid: &str,
        s: &Subject,
        node: &str,
    ) -> anyhow::Result<String> {
        let count = || async {
            let pods = self.pods(ns, uid, &s.via).await?;
            let on: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
                .collect();
            let ready = on.iter().filter(|p| monitor::pod_state(p).ready).count();
            anyhow::Ok((on.len(), ready))
        };
        let r = poll(
            &format!("the pods on {node} marked not ready"),
            Duration::from_secs(30),
            Duration::from_millis(500),
            || async {
                match count().await {
                    Ok((_, 0)) => Check::Met,
                    Ok((n, ready)) => Check::Pending(format!("{ready} of {n} still Ready")),
                    Err(e) => Check::Pending(format!("{e:#}")),
                }
            },
        )
        .await;
        let (n, ready) = count().await?;
        Ok(match r {
            Ok(_) => format!("its {n} pod(s) of the subject there marked not ready"),
            Err(_) => {
                format!("{ready} of its {n} pod(s) of the subject there still Ready after 30 s")
            }
        })
    }

    /// Perturbation `p` of a behaviour trial on `side` in namespace `ns`, what it leaves in
    /// `undo`: what it did, a line.
    pub(super) async fn perturb(
        &self,
        side: &Side,
        ns: &str,
        p: Perturbation,
        undo: &mut Undo,
    ) -> anyhow::Result<String> {
        match p {
            // What acts on the whole controller first: it needs no pod.
            Perturbation::RestartManager
            | Perturbation::RestartApiserver
            | Perturbation::HoldEvents { .. }
            | Perturbation::DropEvents { .. }
            | Perturbation::CloseWatches { .. } => self.perturb_controller(side, ns, p, undo).await,
            Perturbation::DeleteCopy => self.delete_copy(&side.wapi, &side.wname).await,
            Perturbation::DeletePod { .. }
            | Perturbation::EvictPod { .. }
            | Perturbation::CordonNode
            | Perturbation::SilenceNode => self.perturb_pods(side, ns, p, undo).await,
        }
    }

    /// A perturbation of the whole controller or cluster: the manager restarted, its watches
    /// held, dropped or closed (through the apiserver proxy), the apiserver restarted.
    async fn perturb_controller(
        &self,
        side: &Side,
        ns: &str,
        p: Perturbation,
        undo: &mut Undo,
    ) -> anyhow::Result<String> {
        let proxy = || {
            self.installation.proxy().ok_or_else(|| {
                anyhow::anyhow!("the manager does not talk through an apiserver proxy on this cell")
            })
        };
        let plural = |of: Watched| async move {
            let kind = match of {
                Watched::Pods => return anyhow::Ok("pods".to_string()),
                Watched::Own => &side.subject,
            };
            Ok(resource(&self.client, &kind.api_version, kind.kind)
                .await?
                .0
                .plural)
        };
        match p {
            Perturbation::RestartManager => {
                // Right after the manager's next write (the previous step's consequence), when
                // the proxy can tell one.
                let after = match self.installation.proxy() {
                    Some(proxy) => match proxy.next_write(Duration::from_secs(10)).await {
                        Some(write) => format!(" right after its write {write}"),
                        None => " (no write of it within 10 s)".into(),
                    },
                    None => String::new(),
                };
                let restarted = self.installation.restart(&self.client).await?;
                Ok(match restarted.is_empty() {
                    true => "nothing restarts the controller on this cell: left running".into(),
                    false => format!("killed and restarted {}{after}", restarted.join(", ")),
                })
            }
            Perturbation::HoldEvents { of, seconds } => {
                let (proxy, r) = (proxy()?, plural(of).await?);
                proxy.hold(&r, Duration::from_secs(seconds));
                undo.stale.push(r.clone());
                Ok(format!("holding the manager's {r} events for {seconds} s"))
            }
            Perturbation::DropEvents { of, seconds } => {
                let (proxy, r) = (proxy()?, plural(of).await?);
                proxy.drop_events(&r, Duration::from_secs(seconds));
                undo.stale.push(r.clone());
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                let dropped = proxy.stats(&r).dropped;
                proxy.close_watches(&r);
                Ok(format!(
                    "dropped the manager's {r} events for {seconds} s ({dropped} so far), then ended its watches"
                ))
            }
            Perturbation::CloseWatches { of } => {
                let (proxy, r) = (proxy()?, plural(of).await?);
                proxy.close_watches(&r);
                Ok(format!("ended the manager's {r} watches"))
            }
            Perturbation::RestartApiserver => {
                let restarted = match self.cluster {
                    Some(c) => c.restart_apiserver().await?,
                    None => None,
                };
                if restarted.is_some() {
                    undo.served = Some(self.installation.window(ns));
                    undo.served_at = Some(k8s_openapi::jiff::Timestamp::now());
                }
                Ok(match restarted {
                    Some(took) => format!(
                        "killed the apiserver and started it again: serving after {:.1} s",
                        took.as_secs_f64()
                    ),
                    None => "the harness does not run this cell's apiserver: left running".into(),
                })
            }
            Perturbation::DeletePod { .. }
            | Perturbation::EvictPod { .. }
            | Perturbation::CordonNode
            | Perturbation::SilenceNode
            | Perturbation::DeleteCopy => unreachable!("a perturbation of pods or copies"),
        }
    }

    /// A perturbation of the subject's pods (picked by their image: old, new; the one made
    /// last; any) or of the node one runs on: deleted, evicted, cordoned, silenced.
    async fn perturb_pods(
        &self,
        side: &Side,
        ns: &str,
        p: Perturbation,
        undo: &mut Undo,
    ) -> anyhow::Result<String> {
        let (s, api, name) = (&side.workload, &side.wapi, side.wname.as_str());
        let obj = serde_json::to_value(api.get(name).await?)?;
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        let image = get(&obj, &s.template)["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut pods: Vec<Pod> = self
            .pods(ns, uid, &s.via)
            .await?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let at = |p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                == Some(image.clone())
        };
        let pick = |which: Which| match which {
            // The one made last (by name among those made in the same second).
            Which::Newest => pods
                .iter()
                .max_by(|a, b| {
                    let made = |p: &Pod| p.metadata.creation_timestamp.clone().map(|t| t.0);
                    made(a)
                        .cmp(&made(b))
                        .then(a.metadata.name.cmp(&b.metadata.name))
                })
                .cloned(),
            _ => pods
                .iter()
                .find(|p| match which {
                    Which::Old => !at(p),
                    Which::New => at(p),
                    Which::Newest | Which::Any => true,
                })
                .cloned(),
        };
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        match p {
            Perturbation::DeletePod { which } => {
                let Some(pod) = pick(which) else {
                    return Ok(format!("no {which:?} pod"));
                };
                let n = pod.metadata.name.unwrap_or_default();
                pod_api.delete(&n, &DeleteParams::default()).await?;
                Ok(format!("deleted {n}"))
            }
            Perturbation::EvictPod { which } => {
                let Some(pod) = pick(which) else {
                    return Ok(format!("no {which:?} pod"));
                };
                let n = pod.metadata.name.unwrap_or_default();
                match pod_api.evict(&n, &Default::default()).await {
                    Ok(_) => Ok(format!("evicted {n}")),
                    Err(kube::Error::Api(e)) => {
                        Ok(format!("eviction of {n} refused: {}", e.message))
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Perturbation::CordonNode => {
                let Some(node) = pick(Which::Any).and_then(|p| p.spec.and_then(|s| s.node_name))
                else {
                    return Ok("no scheduled pod".into());
                };
                let nodes: Api<Node> = Api::all(self.client.clone());
                let patch = json!({"spec": {"unschedulable": true}});
                nodes
                    .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                undo.cordoned.push(node.clone());
                Ok(format!("cordoned {node}"))
            }
            Perturbation::SilenceNode => {
                let node = pick(Which::Any).and_then(|p| p.spec.and_then(|s| s.node_name));
                self.silence_node(node, ns, uid, s, undo).await
            }
            Perturbation::RestartManager
            | Perturbation::RestartApiserver
            | Perturbation::HoldEvents { .. }
            | Perturbation::DropEvents { .. }
            | Perturbation::CloseWatches { .. }
            | Perturbation::DeleteCopy => {
                unreachable!("a perturbation of the controller or copies")
            }
        }
    }

    /// Silences the kubelet of `node`, one a pod of `s` (its object's `uid`) runs on in `ns`:
    /// without one, waited for (30 s) when none is scheduled yet (the step right after a
    /// create). What it did, and what the node controller made of the pods there.
    async fn silence_node(
        &self,
        mut node: Option<String>,
        ns: &str,
        uid: &str,
        s: &Subject,
        undo: &mut Undo,
    ) -> anyhow::Result<String> {
        if node.is_none() {
            let found = std::sync::Mutex::new(None);
            let _ = poll(
                "a pod of the subject scheduled",
                Duration::from_secs(30),
                Duration::from_millis(500),
                || async {
                    let pods = self.pods(ns, uid, &s.via).await.unwrap_or_default();
                    let on = pods.into_iter().find_map(|p| {
                        p.metadata.deletion_timestamp.is_none().then_some(())?;
                        p.spec.and_then(|s| s.node_name)
                    });
                    let met = on.is_some();
                    *found.lock().expect("not poisoned") = on;
                    Check::when(met, || "none scheduled".into())
                },
            )
            .await;
            node = found.into_inner().expect("not poisoned");
        }
        let Some(node) = node else {
            return Ok("no pod scheduled within 30 s".into());
        };
        if undo.silenced.contains(&node) {
            return Ok(format!("{node} is silent already"));
        }
        let silenced = match self.cluster {
            Some(c) => c.silence_node(&node).await?,
            None => None,
        };
        Ok(match silenced {
            Some(took) => {
                undo.silenced.push(node.clone());
                let on_node = self.unready_on(ns, uid, s, &node).await?;
                format!(
                    "silenced the kubelet of {node}: NotReady after {:.0} s, {on_node}",
                    took.as_secs_f64()
                )
            }
            None => format!("the harness cannot silence the kubelet of {node}: left alone"),
        })
    }
}
