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

use super::subject::{Subject, set};
use super::trial::{Mode, Op, Perturbation, Step};
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
    let mut o = (s.seed)(name);
    for (k, v) in fields {
        let _ = set(&mut o, k, v.clone());
    }
    o
}

/// The trial as a chainsaw test: each step an operation, in order; the step that fired an
/// admission finding expects the answer the rule wants (the twin's), and a behaviour trial
/// ends with the object's status caught up with its spec.
pub fn chainsaw_test(s: &Subject, r: &Reported, controller: &ControllerRef) -> String {
    let deployment = controller.controller().deployment();
    let name = "x";
    let w = s.workload();
    let wname = match s.target {
        Some(_) => super::subject::Target::name(name),
        None => name.to_string(),
    };
    // What every trial may refer to (see `Cell::prepare`), and a policy's target, with no
    // pods until the policy exists.
    let mut steps = vec![
        json!({"name": "the cell's objects", "try": [{"apply": {"resource": {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": super::subject::PRIORITY_CLASS}, "value": 1000}}}]}),
    ];
    if s.target.is_some() {
        let mut target = (w.seed)(&wname);
        // With the target's fields of the trial's create.
        if let Some(Step::Create { set }) = r.trial.steps.first() {
            for (k, v) in super::subject::split_target(set).1 {
                let _ = super::subject::set(&mut target, &k, v);
            }
        }
        target["spec"]["replicas"] = json!(0);
        steps.push(json!({"name": "the target", "try": [{"apply": {"resource": target}}]}));
    }
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
                    false => ((s.api_version, s.kind), name, own),
                    true => ((w.api_version, w.kind), wname.as_str(), target),
                };
                let mut patch = json!({"apiVersion": kind.0, "kind": kind.1,
                    "metadata": {"name": n}});
                for (k, v) in set {
                    let _ = super::subject::set(&mut patch, &k, v);
                }
                json!({"patch": {"resource": patch}})
            }
            Step::Operate { op } => json!({"script": {"content": kubectl_op(&w, *op, &wname)}}),
            Step::Perturb { perturbation } => {
                json!({"script": {"content": kubectl_perturb(*perturbation, &wname, deployment)}})
            }
        };
        let scale = s.target.is_some() && matches!(step, Step::Create { .. }) && !judged;
        if judged && refuse {
            let verb = op
                .as_object()
                .and_then(|o| o.keys().next().cloned())
                .unwrap_or_default();
            op[&verb]["expect"] = json!([{"check": {"($error != null)": true}}]);
        }
        let mut ops = vec![op];
        if scale {
            ops.push(
                json!({"patch": {"resource": {"apiVersion": w.api_version, "kind": w.kind,
                "metadata": {"name": wname},
                "spec": {"replicas": (w.seed)(&wname)["spec"]["replicas"]}}}}),
            );
        }
        steps.push(json!({"name": format!("step {}", i + 1), "try": ops}));
    }
    if r.trial.mode == Mode::Behaviour {
        steps.push(
            json!({"name": "settled", "try": [{"assert": {"timeout": "2m", "resource": {
            "apiVersion": w.api_version, "kind": w.kind, "metadata": {"name": wname},
            "(status.observedGeneration == metadata.generation)": true}}}]}),
        );
    }
    let test = json!({
        "apiVersion": "chainsaw.kyverno.io/v1alpha1",
        "kind": "Test",
        "metadata": {"name": format!("explore-{}-{}", r.finding.oracle.short().to_lowercase(), s.name.to_lowercase()),
            "annotations": {"explore.harness.io/oracle": format!("{:?}", r.finding.oracle),
                "explore.harness.io/expected": r.finding.expected}},
        "spec": {"steps": steps},
    });
    serde_saphyr::to_string(&test).unwrap_or_default()
}

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
    }
}

/// The shell line that perturbs workload `name` as `p` does; `deployment` is the controller's
/// manager Deployment (namespace, name), restarted for [`Perturbation::RestartManager`].
fn kubectl_perturb(p: Perturbation, name: &str, deployment: Option<(&str, &str)>) -> String {
    match p {
        Perturbation::DeletePod { .. } => format!(
            "kubectl delete pod -n $NAMESPACE $(kubectl get pod -n $NAMESPACE -l app={name} -o name | head -1) --wait=false"
        ),
        Perturbation::EvictPod { .. } => format!(
            "kubectl drain --pod-selector app={name} --disable-eviction=false --ignore-daemonsets \
             $(kubectl get pod -n $NAMESPACE -l app={name} -o jsonpath='{{.items[0].spec.nodeName}}') --timeout=10s || true"
        ),
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
    write(&dir.join("findings.md"), &markdown(summary))
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
    let _ = writeln!(
        out,
        "| oracle | kind | finding | seen after | reproduced | steps | directory |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} s | {}/{}{} | {} | `{}` |",
            r.finding.oracle.short(),
            r.finding.subject,
            r.finding.key.replace('|', "\\|"),
            r.first_seen,
            r.reproduced,
            r.confirm_runs,
            if r.stable { "" } else { " (unstable)" },
            r.trial.steps.len(),
            r.dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default(),
        );
    }
    out
}
