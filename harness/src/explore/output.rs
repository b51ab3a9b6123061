//! What exploration writes. Start with [`write_finding`]: a finding's directory holds
//!
//! - `trial.yaml`: the shrunk trial, its steps in order (`harness explore --replay DIR` runs
//!   it again);
//! - `original.yaml`: the trial as first generated;
//! - `finding.json`: the oracle, what was seen and what was expected, how often the shrunk
//!   trial reproduced it;
//! - `chainsaw-test.yaml`: the same steps as a chainsaw test, for any cluster;
//! - `manager.log`: the controller's log lines of the confirming run's window;
//! - `ledger.yaml`: a suggested ledger entry, to fill in with the upstream fix.
//!
//! [`write_summary`] writes `explore.json` and `findings.md` beside the findings.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use super::subject::{COPIED_LABEL, Makes, NAME, NAMESPACE, Subject, TRIAL_LABEL, set};
use super::trial::{Mode, Op, Perturbation, Step, Which};
use super::{Reported, Summary};
use crate::controller::ControllerRef;

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("write {}", path.display()))
}

/// Writes finding `r` of `s` into `dir` (made if missing).
pub fn write_finding(
    dir: &Path,
    s: &Subject,
    r: &Reported,
    controller: &ControllerRef,
    manager_log: &str,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    write(&dir.join("trial.yaml"), &r.trial.to_yaml())?;
    write(&dir.join("original.yaml"), &r.original.to_yaml())?;
    write(&dir.join("finding.json"), &serde_json::to_string_pretty(r)?)?;
    write(
        &dir.join("chainsaw-test.yaml"),
        &chainsaw_test(s, r, controller),
    )?;
    write(&dir.join("manager.log"), manager_log)?;
    write(&dir.join("ledger.yaml"), &ledger_entry(s, r, controller))?;
    Ok(())
}

/// Reads the finding a directory holds (its `finding.json`, with `trial.yaml` as edited).
pub fn read_finding(dir: &Path) -> anyhow::Result<Reported> {
    let p = dir.join("finding.json");
    let text = std::fs::read_to_string(&p).with_context(|| {
        format!(
            "read {}: `--replay` takes a finding's directory (findings/<n>-<oracle>-<kind>/)",
            p.display()
        )
    })?;
    let mut r: Reported =
        serde_json::from_str(&text).with_context(|| format!("parse {}", p.display()))?;
    let t = dir.join("trial.yaml");
    let yaml = std::fs::read_to_string(&t).with_context(|| format!("read {}", t.display()))?;
    r.trial = super::trial::Trial::from_yaml(&yaml)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("parse {}", t.display()))?;
    Ok(r)
}

/// The object a create step makes, named `name`.
fn created(s: &Subject, fields: &super::trial::Fields, name: &str) -> Value {
    let mut o = s.seed.make(name);
    for (k, v) in fields {
        let _ = set(&mut o, k, v.clone());
    }
    bound(&o, name)
}

/// `v` for a chainsaw test of object `name`: [`NAME`] is `name`, and a string naming the
/// trial's namespace ([`NAMESPACE`]) becomes a chainsaw expression of the test's
/// (`($namespace)`, or a `join` around it).
fn bound(v: &Value, name: &str) -> Value {
    match v {
        Value::String(t) if t.contains(NAMESPACE) => {
            let t = t.replace(NAME, name);
            let parts: Vec<String> = t
                .split(NAMESPACE)
                .enumerate()
                .flat_map(|(i, p)| {
                    let literal = (!p.is_empty()).then(|| format!("'{p}'"));
                    let ns = (i > 0).then(|| "$namespace".to_string());
                    ns.into_iter().chain(literal)
                })
                .collect();
            match parts.as_slice() {
                [one] if one == "$namespace" => json!("($namespace)"),
                _ => json!(format!("(join('', [{}]))", parts.join(", "))),
            }
        }
        Value::String(t) => json!(t.replace(NAME, name)),
        Value::Array(items) => Value::Array(items.iter().map(|i| bound(i, name)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.replace(NAME, name), bound(v, name)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The trial as a chainsaw test: each step an operation, in order; the step that fired an
/// admission finding expects the answer the rule wants (the twin's), and a behaviour trial
/// ends with the object's status caught up with its spec.
pub fn chainsaw_test(s: &Subject, r: &Reported, controller: &ControllerRef) -> String {
    let deployment = controller.controller().deployment();
    let name = "x";
    let w = s.workload();
    let wname = match s.target {
        Some(_) => super::subject::target_name(name),
        None => name.to_string(),
    };
    // What every trial may refer to (see `Cell::prepare`), and a policy's target, kept from
    // making pods until the policy exists.
    let mut cell = vec![json!({"apply": {"resource": {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": super::openapi::REFERENCED}, "value": 1000}}})];
    // The test's namespace is labelled as a trial's are (a selector of the trial's namespaces
    // names the label).
    if s.makes == Makes::Copies {
        cell.push(json!({"script": {"content":
            format!("kubectl label namespace $NAMESPACE {TRIAL_LABEL}=$NAMESPACE")}}));
    }
    let mut steps = vec![json!({"name": "the cell's objects", "try": cell})];
    if s.target.is_some() {
        let mut target = w.seed.make(&wname);
        // With the target's fields of the trial's create.
        let mut fields = match r.trial.steps.first() {
            Some(Step::Create { set }) => super::subject::split_target(set).1,
            _ => Default::default(),
        };
        fields.extend(w.idle());
        for (k, v) in fields {
            let _ = super::subject::set(&mut target, &k, v);
        }
        steps.push(json!({"name": "the target", "try": [{"apply": {"resource": target}}]}));
    }
    // The controller has observed the workload's last change (a settle step, the end).
    let observed = || {
        json!({"assert": {"timeout": "2m", "resource": {
            "apiVersion": w.api_version, "kind": w.kind, "metadata": {"name": wname},
            "(status.observedGeneration == metadata.generation)": true}}})
    };
    let refuse = r.finding.key.starts_with("admits");
    let last = r.trial.steps.len().saturating_sub(1);
    for (i, step) in r.trial.steps.iter().enumerate() {
        let judged = r.trial.mode == Mode::Admission && i == last;
        let mut op = match step {
            Step::Create { set } => {
                let own = super::subject::split_target(set).0;
                json!({"apply": {"resource": created(s, &own, name)}})
            }
            Step::Update { set } => {
                // A policy's update of its target's fields changes the target.
                let (own, target) = super::subject::split_target(set);
                let (kind, n, set) = match own.is_empty() {
                    false => ((s.api_version.as_str(), s.kind), name, own),
                    true => ((w.api_version.as_str(), w.kind), wname.as_str(), target),
                };
                let mut patch = json!({"apiVersion": kind.0, "kind": kind.1,
                    "metadata": {"name": n}});
                for (k, v) in set {
                    let _ = super::subject::set(&mut patch, &k, v);
                }
                json!({"patch": {"resource": bound(&patch, n)}})
            }
            // A namespace the test makes is chainsaw's to remove.
            Step::Operate {
                op: Op::AddNamespace,
            } => json!({"create": {"resource": {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "(join('', [$namespace, '-added']))",
                             "labels": {TRIAL_LABEL: "($namespace)"}}}}}),
            Step::Operate { op } => match op.parts() {
                (None, Some(declared)) => {
                    json!({"script": {"content": kubectl_declared(s, declared, name)}})
                }
                _ => json!({"script": {"content": kubectl_op(&w, *op, &wname)}}),
            },
            Step::Perturb { perturbation } => {
                json!({"script": {"content": kubectl_perturb(*perturbation, &wname, deployment)}})
            }
            Step::Settle => observed(),
        };
        let scale = match step {
            Step::Create { set } if s.target.is_some() && !judged => Some(set),
            _ => None,
        };
        if judged && refuse {
            let verb = op
                .as_object()
                .and_then(|o| o.keys().next().cloned())
                .unwrap_or_default();
            op[&verb]["expect"] = json!([{"check": {"($error != null)": true}}]);
        }
        let mut ops = vec![op];
        // A policy's declared containers change with its target's template.
        if let Step::Operate { op } = step
            && let (Some(_), Some(declared)) = op.parts()
            && s.declares_containers()
        {
            ops.push(json!({"script": {"content": kubectl_declared(s, declared, name)}}));
        }
        if let Some(set) = scale {
            let mut wake = w.wake(&wname, &super::subject::split_target(set).1);
            wake["apiVersion"] = json!(w.api_version);
            wake["kind"] = json!(w.kind);
            wake["metadata"] = json!({"name": wname});
            ops.push(json!({"patch": {"resource": wake}}));
        }
        steps.push(json!({"name": format!("step {}", i + 1), "try": ops}));
    }
    if r.trial.mode == Mode::Behaviour {
        steps.push(json!({"name": "settled", "try": [observed()]}));
    }
    let test = json!({
        "apiVersion": "chainsaw.kyverno.io/v1alpha1",
        "kind": "Test",
        "metadata": {"name": format!("explore-{}-{}", r.finding.oracle.short().to_lowercase(), s.slug()),
            "annotations": {"explore.harness.io/oracle": format!("{:?}", r.finding.oracle),
                "explore.harness.io/expected": r.finding.expected}},
        "spec": {"steps": steps},
    });
    serde_saphyr::to_string(&test).unwrap_or_default()
}

/// The label and annotation key [`Op::Retag`] adds (in a trial, numbered after those already
/// there).
pub(super) const RETAGGED: &str = "explore.harness.io/retagged";

fn kubectl_op(s: &Subject, op: Op, name: &str) -> String {
    let res = format!(
        "{}.{}",
        s.kind.to_lowercase(),
        s.api_version.split('/').next().unwrap_or_default()
    );
    match op {
        Op::ScaleUp | Op::ScaleDown => format!(
            "n=$(kubectl get {res} {name} -n $NAMESPACE -o jsonpath='{{.spec.replicas}}'); \
             kubectl scale {res} {name} -n $NAMESPACE --replicas=$((n {} 1))",
            if op == Op::ScaleUp { '+' } else { '-' }
        ),
        Op::Rollout => {
            format!("kubectl set image {res}/{name} -n $NAMESPACE main=busybox:explore-next")
        }
        Op::Recreate => format!("kubectl set env {res}/{name} -n $NAMESPACE EXPLORE_RECREATE=1"),
        Op::ChangeSelector => format!(
            "kubectl patch {res} {name} -n $NAMESPACE --type merge -p \
             '{{\"spec\":{{\"selector\":{{\"matchLabels\":{{\"app\":\"{name}\",\"generation\":\"2\"}}}}}}}}'"
        ),
        Op::Rewrite => format!(
            "kubectl patch {res} {name} --type merge -p \
             '{{\"spec\":{{\"resource\":{{\"data\":{{\"explore-next\":\"dg==\"}}}}}}}}'"
        ),
        Op::Retag => format!(
            "kubectl patch {res} {name} --type merge -p \
             '{{\"spec\":{{\"resource\":{{\"metadata\":{{\"labels\":{{\"{RETAGGED}\":\"v\"}},\"annotations\":{{\"{RETAGGED}\":\"v\"}}}}}}}}}}'"
        ),
        Op::AddNamespace => format!(
            "kubectl create namespace $NAMESPACE-added && \
             kubectl label namespace $NAMESPACE-added {TRIAL_LABEL}=$NAMESPACE"
        ),
        // What a policy declares changes by `kubectl_declared`, its target as it was.
        Op::RolloutDeclared | Op::RecreateDeclared => ":".to_string(),
        Op::Relabel => format!(
            "if kubectl get namespace $NAMESPACE -o jsonpath='{{.metadata.labels}}' | grep -q '{TRIAL_LABEL}'; \
             then kubectl label namespace $NAMESPACE {TRIAL_LABEL}-; \
             else kubectl label namespace $NAMESPACE {TRIAL_LABEL}=$NAMESPACE; fi"
        ),
    }
}

/// The shell line that changes the first container policy `name` of `s` declares as `op`
/// changes a template (see `Cell::operate_declared`).
fn kubectl_declared(s: &Subject, op: Op, name: &str) -> String {
    let res = format!(
        "{}.{}",
        s.kind.to_lowercase(),
        s.api_version.split('/').next().unwrap_or_default()
    );
    let change = match op {
        Op::Recreate => {
            r#"{"op":"add","path":"/spec/containers/0/env","value":[{"name":"EXPLORE_RECREATE","value":"1"}]}"#
        }
        _ => r#"{"op":"replace","path":"/spec/containers/0/image","value":"busybox:explore-next"}"#,
    };
    format!("kubectl patch {res} {name} -n $NAMESPACE --type json -p '[{change}]'")
}

/// The shell line that perturbs workload `name` as `p` does; `deployment` is the controller's
/// manager Deployment (namespace, name), restarted for [`Perturbation::RestartManager`].
fn kubectl_perturb(p: Perturbation, name: &str, deployment: Option<(&str, &str)>) -> String {
    match p {
        Perturbation::DeletePod {
            which: Which::Newest,
        } => format!(
            "kubectl delete pod -n $NAMESPACE $(kubectl get pod -n $NAMESPACE -l app={name} -o name \
             --sort-by=.metadata.creationTimestamp | tail -1) --wait=false"
        ),
        Perturbation::DeletePod { .. } => format!(
            "kubectl delete pod -n $NAMESPACE $(kubectl get pod -n $NAMESPACE -l app={name} -o name | head -1) --wait=false"
        ),
        Perturbation::EvictPod { .. } => format!(
            "kubectl drain --pod-selector app={name} --disable-eviction=false --ignore-daemonsets \
             $(kubectl get pod -n $NAMESPACE -l app={name} -o jsonpath='{{.items[0].spec.nodeName}}') --timeout=10s || true"
        ),
        Perturbation::DeleteCopy => {
            format!("kubectl delete configmap,secret -n $NAMESPACE -l {COPIED_LABEL} --wait=false")
        }
        Perturbation::CordonNode => format!(
            "kubectl cordon $(kubectl get pod -n $NAMESPACE -l app={name} -o jsonpath='{{.items[0].spec.nodeName}}')"
        ),
        Perturbation::RestartManager => match deployment {
            Some((ns, name)) => format!(
                "kubectl delete pod -n {ns} $(kubectl get pod -n {ns} -o name | grep {name} | head -1) \
                 --grace-period=0 --force --wait=false"
            ),
            None => {
                "echo 'restart the controller by hand: it ships no Deployment' >&2; exit 1".into()
            }
        },
        // A stale view needs the harness's apiserver proxy: the test says so and goes on
        // (`harness explore --replay` makes it).
        Perturbation::HoldEvents { of, seconds } => format!(
            "echo 'here the manager saw no {of:?} watch events for {seconds} s \
             (harness explore --replay holds them)'"
        ),
        Perturbation::DropEvents { of, seconds } => format!(
            "echo 'here the manager lost {seconds} s of {of:?} watch events, then its watches \
             (harness explore --replay drops them)'"
        ),
        Perturbation::CloseWatches { of } => format!(
            "echo 'here the manager lost its {of:?} watches (harness explore --replay ends them)'"
        ),
        // Silencing a kubelet and crashing an apiserver are the cluster's to do: the test says
        // so and goes on (`harness explore --replay` does them on a local cell).
        Perturbation::SilenceNode => format!(
            "echo 'here the kubelet of the node of a pod of {name} went silent until the steps \
             were done (harness explore --replay silences it)'"
        ),
        Perturbation::RestartApiserver => "echo 'here the apiserver crashed and started again \
             (harness explore --replay restarts it)'"
            .into(),
    }
}

/// A ledger entry for the finding, to complete with the catalog scenario that pins it and the
/// upstream fix.
pub fn ledger_entry(s: &Subject, r: &Reported, controller: &ControllerRef) -> String {
    let mut out = String::new();
    let first = r.finding.observed.lines().next().unwrap_or_default();
    let _ = writeln!(
        out,
        "# Suggested: pin it with a catalog scenario, cite the upstream fix."
    );
    let _ = writeln!(
        out,
        "- id: explore-{}-{}",
        r.finding.oracle.short().to_lowercase(),
        s.name.to_lowercase()
    );
    let _ = writeln!(out, "  scenario: <suite>/<scenario that reproduces it>");
    let _ = writeln!(out, "  controller: {{max: {}}}", controller.version);
    let _ = writeln!(out, "  kubernetes: {{}}");
    let _ = writeln!(out, "  signature: {:?}", r.finding.key);
    let _ = writeln!(
        out,
        "  summary: {:?}",
        format!("{} ({}): {first}", s.name, r.finding.oracle.short())
    );
    out
}

/// Writes `explore.json` (the summary) and `findings.md` (a table by oracle and kind) in `dir`.
pub fn write_summary(dir: &Path, summary: &Summary) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    write(
        &dir.join("explore.json"),
        &serde_json::to_string_pretty(summary)?,
    )?;
    write(&dir.join("findings.md"), &markdown(summary))?;
    write(
        &dir.join("reach.md"),
        &super::reach::markdown(&summary.reach, &summary.gates.to_string()),
    )
}

/// The findings as a Markdown table, by oracle and kind.
pub fn markdown(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Exploration of {} on Kubernetes {} (seed {}){}{}\n",
        summary.controller,
        summary.kubernetes,
        summary.seed,
        summary
            .baseline
            .as_ref()
            .map(|b| format!(", against {b}"))
            .unwrap_or_default(),
        if summary.gates.is_empty() {
            String::new()
        } else {
            format!(", {}", summary.gates)
        }
    );
    let total: usize = summary.trials.values().sum();
    let _ = writeln!(
        out,
        "{total} trials in {:.0} s: {}\n",
        summary.seconds,
        summary
            .trials
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut rows: Vec<&Reported> = summary.findings.iter().collect();
    rows.sort_by(|a, b| {
        (a.finding.oracle, &a.finding.subject).cmp(&(b.finding.oracle, &b.finding.subject))
    });
    // Apart, by what confirming them said: those that fired every time, those that did not
    // (a timing, another trial beside them), and those past the shrink share.
    let titles = [
        "Stable: fired by every confirming run",
        "Unstable: fired by some confirming runs only",
        "Not confirmed (`--replay` confirms them)",
    ];
    let part_of = |r: &Reported| match (r.confirmed(), r.stable) {
        (true, true) => 0,
        (true, false) => 1,
        (false, _) => 2,
    };
    for (i, title) in titles.into_iter().enumerate() {
        let part: Vec<&&Reported> = rows.iter().filter(|r| part_of(r) == i).collect();
        if part.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "## {title} ({})
",
            part.len()
        );
        let _ = writeln!(
            out,
            "| oracle | kind | finding | seen after | reproduced | steps | directory |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for r in part {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} s | {} | {} | `{}` |",
                r.finding.oracle.short(),
                r.finding.subject,
                r.finding.key.replace('|', "\\|"),
                r.first_seen,
                r.reproduction(),
                r.trial.steps.len(),
                r.dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default(),
            );
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::{Finding, Oracle};
    use crate::explore::trial::{Fields, Trial};

    /// A stable O2 finding `key` of `s`, fired by `trial`.
    fn reported(s: &Subject, trial: Trial, key: &str) -> Reported {
        Reported {
            finding: Finding {
                oracle: Oracle::Convergence,
                subject: s.name.clone(),
                key: key.into(),
                observed: "o".into(),
                expected: "e".into(),
            },
            original: trial.clone(),
            trial,
            reproduced: 3,
            confirm_runs: 3,
            stable: true,
            first_seen: 1.0,
            dir: "d".into(),
            controller: "openkruise@v1.9.0".into(),
            kubernetes: "1.32.5".into(),
            baseline: None,
            gates: Default::default(),
            also: vec![],
        }
    }

    /// The first subject of `kind` and its behaviour trial 0 of `steps`.
    fn behaviour(kind: &str, steps: Vec<Step>) -> (Subject, Trial) {
        let s = crate::explore::select(&[kind.to_string()])
            .unwrap()
            .remove(0);
        let trial = Trial {
            subject: s.name.clone(),
            mode: Mode::Behaviour,
            seed: 1,
            index: 0,
            steps,
        };
        (s, trial)
    }

    #[test]
    fn findings_md_lists_stable_unstable_and_unconfirmed_findings_apart() {
        let (s, trial) = behaviour("CloneSet", vec![Step::Create { set: Fields::new() }]);
        let stable = reported(&s, trial.clone(), "stays");
        let mut flaky = reported(&s, trial.clone(), "wobbles");
        (flaky.reproduced, flaky.stable) = (1, false);
        let mut late = reported(&s, trial, "waits");
        (late.reproduced, late.confirm_runs, late.stable) = (0, 0, false);
        let summary = Summary {
            findings: vec![late, flaky, stable],
            ..Default::default()
        };
        let md = markdown(&summary);
        let at = |text: &str| md.find(text).unwrap_or_else(|| panic!("{text} in {md}"));
        assert!(at("## Stable") < at("| stays |"));
        assert!(at("| stays |") < at("## Unstable"));
        assert!(at("## Unstable") < at("| wobbles |"));
        assert!(at("| wobbles |") < at("## Not confirmed"));
        assert!(at("## Not confirmed") < at("| waits |"));
        assert!(md.contains("## Unstable: fired by some confirming runs only (1)"));
        let only_stable = Summary {
            findings: vec![summary.findings[2].clone()],
            ..Default::default()
        };
        assert!(
            !markdown(&only_stable).contains("## Unstable"),
            "no empty part"
        );
    }

    #[test]
    fn placeholders_become_the_chainsaw_tests_namespace_and_the_objects_name() {
        assert_eq!(bound(&json!(NAMESPACE), "x"), json!("($namespace)"));
        assert_eq!(
            bound(&json!(format!("{NAMESPACE}-excluded")), "x"),
            json!("(join('', [$namespace, '-excluded']))")
        );
        assert_eq!(bound(&json!(NAME), "x"), json!("x"));
        assert_eq!(
            bound(&json!({"matchLabels": {TRIAL_LABEL: NAMESPACE}}), "x"),
            json!({"matchLabels": {TRIAL_LABEL: "($namespace)"}})
        );
    }

    #[test]
    fn a_copying_kinds_chainsaw_test_labels_its_namespace_and_names_no_placeholder() {
        let (s, trial) = behaviour(
            "ResourceDistribution",
            vec![
                Step::Create { set: Fields::new() },
                Step::Operate {
                    op: Op::AddNamespace,
                },
                Step::Operate { op: Op::Rewrite },
                Step::Operate { op: Op::Retag },
                Step::Perturb {
                    perturbation: Perturbation::DeleteCopy,
                },
            ],
        );
        let r = reported(&s, trial, "does not converge: copy data");
        let text = chainsaw_test(&s, &r, &"openkruise@v1.9.0".parse().unwrap());
        assert!(!text.contains("$("), "{text}");
        assert!(
            text.contains(&format!("{TRIAL_LABEL}=$NAMESPACE")),
            "{text}"
        );
        assert!(
            text.contains("(join('', [$namespace, '-added']))"),
            "{text}"
        );
        assert!(text.contains("explore-next"), "{text}");
        assert!(text.contains("explore.harness.io/retagged"), "{text}");
        assert!(text.contains(COPIED_LABEL), "{text}");
    }

    #[test]
    fn a_policys_rollout_changes_its_declared_containers_and_a_settle_waits_for_the_status() {
        let (s, trial) = behaviour(
            "SidecarSet",
            vec![
                Step::Create { set: Fields::new() },
                Step::Operate { op: Op::Rollout },
                Step::Settle,
                Step::Perturb {
                    perturbation: Perturbation::DeletePod {
                        which: Which::Newest,
                    },
                },
            ],
        );
        let r = reported(&s, trial, "does not converge: injected image");
        let text = chainsaw_test(&s, &r, &"openkruise@v1.9.0".parse().unwrap());
        assert!(
            text.contains("kubectl patch sidecarset.apps.kruise.io x -n $NAMESPACE --type json"),
            "{text}"
        );
        assert!(text.contains("/spec/containers/0/image"), "{text}");
        assert!(
            text.contains("--sort-by=.metadata.creationTimestamp | tail -1"),
            "{text}"
        );
        // The settle step and the end each wait for the status to catch up.
        assert_eq!(
            text.matches("(status.observedGeneration == metadata.generation)")
                .count(),
            2,
            "{text}"
        );
        // A rollout of what it declares alone: the policy patched, its target set no image.
        let (s, trial) = behaviour(
            "SidecarSet",
            vec![
                Step::Create { set: Fields::new() },
                Step::Operate {
                    op: Op::RolloutDeclared,
                },
            ],
        );
        let r = reported(&s, trial, "does not converge: injected version");
        let text = chainsaw_test(&s, &r, &"openkruise@v1.9.0".parse().unwrap());
        assert!(text.contains("/spec/containers/0/image"), "{text}");
        assert!(!text.contains("kubectl set image"), "{text}");
    }
}
