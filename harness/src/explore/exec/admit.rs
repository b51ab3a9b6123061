//! An admission trial on a cell: [`Cell::admit`] (start there) sends its steps, the last one
//! as a dry run, to the subject and to its native twin, and judges the answers.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::{
    Cell, Outcome, answer, api_for, object, patch_of, read, resolved, scoped_name, strict,
};
use crate::explore::oracle::{self, Answer};
use crate::explore::subject::{Subject, Twin, resolve};
use crate::explore::trial::{Fields, Step, Trial};

impl Cell<'_> {
    /// Runs admission trial `trial` in namespace `ns` (which may be shared: the objects are
    /// named `name`): its last create or update as a dry run on the subject and its twin, the
    /// steps before it for real on both sides. A step before it that is refused ends the
    /// trial there, its answer kept and the refusal logged, not the exploration.
    pub async fn admit(
        &self,
        s: &Subject,
        trial: &Trial,
        ns: &str,
        name: &str,
    ) -> anyhow::Result<Outcome> {
        let mut out = Outcome::default();
        let name = &scoped_name(&self.client, s, ns, name).await?;
        let ours = api_for(&self.client, ns, &s.api_version, s.kind).await?;
        let twin = match s.twin.as_deref() {
            Some(t) => Some((t, api_for(&self.client, ns, &t.api_version, t.kind).await?)),
            None => None,
        };
        // A twin of the subject's own kind (a policy over another target) is named apart.
        let tname = match s.twin.as_deref() {
            Some(t) if t.kind == s.kind && t.api_version == s.api_version => format!("{name}-t"),
            _ => name.to_string(),
        };
        let tname = tname.as_str();
        let n = trial.steps.len();
        for (i, step) in trial.steps.iter().enumerate() {
            let last = i + 1 == n;
            let mut params = strict();
            params.dry_run = last;
            let (verb, fields, mine, theirs) = match step {
                Step::Create { set } => {
                    let Some((own, o)) = super::created(s, set, ns, name) else {
                        anyhow::bail!("set {set:?} on the seed object");
                    };
                    if let Some(m) = self.make_target(ns, s, name, set).await? {
                        out.log
                            .push(format!("create {set:?}: the target refused: {m}"));
                        out.answers
                            .push(Answer::Refused(format!("the target refused: {m}")));
                        break;
                    }
                    let r = ours.patch(name, &params, &Patch::Apply(&o)).await;
                    if last && let Ok(stored) = &r {
                        let stored = serde_json::to_value(stored)?;
                        out.findings.extend(oracle::stored(s, &own, &stored));
                    }
                    let mine = answer(r);
                    let theirs = match &twin {
                        Some((t, api)) => {
                            self.twin_create(s, t, api, (set, &own, &o), (ns, tname), &params)
                                .await?
                        }
                        None => None,
                    };
                    ("create", set, mine, theirs)
                }
                Step::Update { set } => {
                    let mine_set = resolved(set, ns, name);
                    // Each object read once: what the patch is made on is what the twin's
                    // answer is weighed against.
                    let held_mine = read(&ours, name).await;
                    let Some(patch) = held_mine
                        .as_ref()
                        .and_then(|o| patch_of(o, &mine_set, |k| Some(k.to_string())))
                    else {
                        anyhow::bail!("set {set:?} on the object");
                    };
                    let mine = answer(ours.patch(name, &params, &Patch::Merge(&patch)).await);
                    let theirs = match &twin {
                        Some((_, api)) => {
                            let set = resolved(set, ns, tname);
                            let held = read(api, tname).await;
                            let theirs = held.as_ref().unwrap_or(&Value::Null);
                            let foreign = foreign_mount(
                                &mounted(set.values()),
                                set.values(),
                                held_mine.as_ref().unwrap_or(&Value::Null),
                                theirs,
                            );
                            if let Some(k) = removes_nothing(theirs, &set, |k| s.twin_path(k)) {
                                Some(Answer::UnknownField(format!(
                                    "the twin holds no {k} to remove"
                                )))
                            } else if let Some(v) = foreign {
                                Some(Answer::UnknownField(format!(
                                    "the twin has no volume {v} to mount"
                                )))
                            } else {
                                match held.and_then(|h| patch_of(&h, &set, |k| s.twin_path(k))) {
                                    Some(p) => Some(answer(
                                        api.patch(tname, &params, &Patch::Merge(&p)).await,
                                    )),
                                    None => None,
                                }
                            }
                        }
                        None => None,
                    };
                    ("update", set, mine, theirs)
                }
                other => {
                    anyhow::bail!("an admission trial has only creates and updates, not {other:?}")
                }
            };
            out.log
                .push(format!("{verb} {fields:?}: {mine:?} (twin: {theirs:?})"));
            let paths: Vec<(&str, &Value)> = fields.iter().map(|(k, v)| (k.as_str(), v)).collect();
            if last {
                out.findings
                    .extend(oracle::admission(s, verb, &paths, &mine, theirs.as_ref()));
            } else if mine != Answer::Admitted {
                // Not this trial's update to judge: what it starts from was refused (a target
                // kind a policy refuses, say). Said, and the trial ends there, as when its
                // target is refused.
                out.log.push(
                    "the object an update starts from was refused: the update is not tried".into(),
                );
                out.answers.push(mine);
                break;
            }
            out.answers.push(mine);
        }
        out.end.admitted = out.answers.iter().map(|a| *a == Answer::Admitted).collect();
        Ok(out)
    }

    /// The twin's answer to the create of `set` (the subject's own fields `own`, which made
    /// the subject's object `mine`) as object `tname` in `ns`: none when the twin has no path
    /// for a field or its target refused.
    async fn twin_create(
        &self,
        s: &Subject,
        t: &Twin,
        api: &Api<DynamicObject>,
        (set, own, mine): (&Fields, &Fields, &Value),
        (ns, tname): (&str, &str),
        params: &PatchParams,
    ) -> anyhow::Result<Option<Answer>> {
        let seed = resolve(&t.seed.make(tname), ns, tname);
        if let Some(k) = removes_nothing(&seed, own, |k| s.twin_path(k)) {
            return Ok(Some(Answer::UnknownField(format!(
                "the twin's seed holds no {k} to remove"
            ))));
        }
        if let Some(v) = foreign_mount(&mounted(own.values()), own.values(), mine, &seed) {
            return Ok(Some(Answer::UnknownField(format!(
                "the twin has no volume {v} to mount"
            ))));
        }
        let Some(o) = object(seed, own, |k| s.twin_path(k)) else {
            return Ok(None);
        };
        // The twin's target, with the target's fields at its twin's paths; one it cannot be
        // made with (a field its schema has not) leaves the create without the twin's answer.
        let refused = match (s.twin_subject(), s.twin_fields(set)) {
            (Some(ts), Some(set)) => match self.make_target(ns, &ts, tname, &set).await {
                Ok(refused) => refused,
                Err(_) => return Ok(None),
            },
            (Some(_), None) => return Ok(None),
            (None, _) => None,
        };
        if refused.is_some() {
            return Ok(None);
        }
        let r = api.patch(tname, params, &Patch::Apply(&o)).await;
        // A field the twin admits by dropping it (its feature gate off) it has not accepted.
        if let Ok(stored) = &r
            && let Some(k) =
                oracle::dropped(own, &serde_json::to_value(stored)?, |k| s.twin_path(k))
        {
            return Ok(Some(Answer::UnknownField(format!(
                "the twin admits {k} by dropping it"
            ))));
        }
        Ok(Some(answer(r)))
    }
}

/// The first field of `set` made absent (null) that `held` (the twin's object, or its seed)
/// does not hold at its twin's path (`twin_path`): removing what is not there changes nothing,
/// so the twin's answer says nothing of the subject's (a field of the subject's seed that the
/// twin's has not, a claim template beside a Deployment, say). None when every removed field is
/// there, or has no twin path (not compared anyway).
fn removes_nothing(
    held: &Value,
    set: &Fields,
    twin_path: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    set.iter()
        .filter(|(_, v)| v.is_null())
        .filter_map(|(k, _)| twin_path(k).map(|p| (k, p)))
        .find(|(_, p)| crate::explore::path::get(held, p).is_null())
        .map(|(k, _)| k.clone())
}

/// The volume names the containers in `values` mount (`volumeMounts`, `volumeDevices`), at
/// any depth.
fn mounted<'v>(values: impl Iterator<Item = &'v Value>) -> std::collections::BTreeSet<String> {
    fn walk(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    if matches!(k.as_str(), "volumeMounts" | "volumeDevices")
                        && let Some(items) = v.as_array()
                    {
                        out.extend(
                            items
                                .iter()
                                .filter_map(|i| i["name"].as_str())
                                .map(String::from),
                        );
                    }
                    walk(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Default::default();
    values.for_each(|v| walk(v, &mut out));
    out
}

/// Whether `v` provides a volume named `name`: a pod volume or a claim template, at any depth.
fn provides(v: &Value, name: &str) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, v)| {
            let named = |at: &[&str]| {
                v.as_array().is_some_and(|items| {
                    items
                        .iter()
                        .any(|i| at.iter().fold(i, |i, k| &i[*k]).as_str() == Some(name))
                })
            };
            (k == "volumes" && named(&["name"]))
                || (k == "volumeClaimTemplates" && named(&["metadata", "name"]))
                || provides(v, name)
        }),
        Value::Array(a) => a.iter().any(|v| provides(v, name)),
        _ => false,
    }
}

/// The first of the volumes `mounts` (mounted by the fields a trial sets, `set`) that the
/// subject's object `mine` provides and the twin's `theirs` does not, nor the fields: a
/// volume only the subject has (a claim template beside a Deployment), which the set's
/// containers name because the subject's do. The twin refuses such a mount for what the
/// trial did not set, so its answer says nothing of the subject's. A mount of a volume
/// neither provides is compared as any other value.
fn foreign_mount<'v>(
    mounts: &std::collections::BTreeSet<String>,
    set: impl Iterator<Item = &'v Value> + Clone,
    mine: &Value,
    theirs: &Value,
) -> Option<String> {
    mounts
        .iter()
        .find(|m| provides(mine, m) && !provides(theirs, m) && !set.clone().any(|v| provides(v, m)))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removing_what_the_twin_does_not_hold_is_not_compared() {
        let twin = json!({"spec": {"replicas": 2, "template": {"spec": {}}}});
        let set = |k: &str, v: Value| Fields::from([(k.to_string(), v)]);
        let same = |k: &str| Some(k.to_string());
        assert_eq!(
            removes_nothing(&twin, &set("spec.volumeClaimTemplates", Value::Null), same),
            Some("spec.volumeClaimTemplates".to_string())
        );
        // The twin holds it: removing it is compared.
        assert_eq!(
            removes_nothing(&twin, &set("spec.replicas", Value::Null), same),
            None
        );
        // A value set, not removed; a field with no twin path.
        assert_eq!(
            removes_nothing(&twin, &set("spec.volumeClaimTemplates", json!([])), same),
            None
        );
        assert_eq!(
            removes_nothing(&twin, &set("spec.x", Value::Null), |_| None),
            None
        );
    }

    #[test]
    fn a_mount_of_a_volume_only_the_subject_has_is_not_compared() {
        let claims = json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}],
            "template": {"spec": {"containers": [{"name": "main",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}}});
        let deployment =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "main"}]}}}});
        let init = json!([{"name": "x", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]);
        let mounts = mounted([&init].into_iter());
        assert_eq!(mounts.iter().collect::<Vec<_>>(), ["data"]);
        assert_eq!(
            foreign_mount(&mounts, [&init].into_iter(), &claims, &deployment),
            Some("data".to_string())
        );
        // Both hold it, or the twin does: compared.
        assert_eq!(
            foreign_mount(&mounts, [&init].into_iter(), &claims, &claims),
            None
        );
        // Neither holds it: a mount of nothing, compared as any other value.
        let other = mounted([&json!([{"volumeMounts": [{"name": "y"}]}])].into_iter());
        assert_eq!(
            foreign_mount(&other, [&init].into_iter(), &claims, &deployment),
            None
        );
        // The set brings the volume itself: compared.
        let volumes =
            json!({"volumes": [{"name": "data", "emptyDir": {}}], "initContainers": init});
        assert_eq!(
            foreign_mount(&mounts, [&volumes].into_iter(), &claims, &deployment),
            None
        );
    }
}
