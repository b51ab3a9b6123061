//! The seed scenarios on kind and on the local provider, in the same test: `harness run
//! --provider kind --kind-offline --labels seed` classifies each seed as the local provider
//! does, and leaves no cluster, private Docker daemon or process behind. The nightly tier
//! (`--ignored`): kind clusters on the offline node image take minutes on two cores.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `harness run <args> --labels seed` with its own state directory; the outcome of each
/// scenario (`pass`, `expected-fail`, ...), the exit code, and what is left after it: the
/// state directory's clusters and private daemons, and processes started from it.
fn seeds(args: &[&str]) -> (BTreeMap<String, String>, Option<i32>, Vec<String>) {
    let mut all = args.to_vec();
    all.extend(["--labels", "seed"]);
    let (report, code, left) = run(&all);
    let outcomes = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["scenario"].as_str().unwrap().to_string(),
                format!(
                    "{} {}",
                    r["outcome"]["result"].as_str().unwrap_or_default(),
                    r["failure"].as_str().unwrap_or_default()
                )
                .trim()
                .to_string(),
            )
        })
        .collect();
    (outcomes, code, left)
}

/// `harness run <args>` with its own state and report directories: its report, its exit
/// code, and what it left ([`left_in`]).
fn run(args: &[&str]) -> (Value, Option<i32>, Vec<String>) {
    let reports = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("run")
        .args(args)
        .arg("--report-dir")
        .arg(reports.path())
        .env("HARNESS_STATE_DIR", state.path())
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(
        &std::fs::read(reports.path().join("latest").join("report.json")).unwrap(),
    )
    .unwrap();
    (report, out.status.code(), left_in(state.path()))
}

/// What a run with state directory `state` left: its clusters and private daemons, and the
/// processes started from it.
fn left_in(state: &Path) -> Vec<String> {
    let mut left: Vec<String> = ["clusters", "providers/docker"]
        .iter()
        .flat_map(|d| entries(&state.join(d)))
        .collect();
    left.extend(common::processes_with(&state.display().to_string()));
    left
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "nightly tier: kind clusters on the offline node image, minutes on two cores"]
fn the_seeds_classify_on_kind_as_on_the_local_provider_and_kind_leaves_nothing() {
    if !common::private_docker_possible() {
        return;
    }
    let (local, local_code, _) = seeds(&[]);
    let (kind, kind_code, left) = seeds(&[
        "--provider",
        "kind",
        "--kind-offline",
        "--clusters-parallel",
        "1",
    ]);
    assert!(local.len() >= 5, "the five seeds ran on local: {local:#?}");
    let verdict = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter()
            .map(|(k, v)| (k.clone(), v.split(' ').next().unwrap_or_default().into()))
            .collect()
    };
    assert_eq!(
        verdict(&kind),
        verdict(&local),
        "kind classifies every seed as local does; kind: {kind:#?} local: {local:#?}"
    );
    assert_eq!((kind_code, local_code), (Some(0), Some(0)));
    assert!(left.is_empty(), "left behind: {left:#?}");
}

/// A client of `kubeconfig`'s current context.
async fn client(kubeconfig: &Path) -> kube::Client {
    let k = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(k, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A running `harness cluster up`, stopped with Ctrl-C (SIGINT) when dropped, the test
/// failing or not, so that its cluster goes with it.
struct Up(std::process::Child);

impl Drop for Up {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let _ = self.0.wait();
    }
}

/// `harness run --provider existing --context <context> --labels seed` against `kubeconfig`:
/// the scenarios that passed, and those skipped, each checked to name what the cluster lacks.
fn existing_seeds(kubeconfig: &Path, context: &str) -> (Vec<String>, Vec<(String, String)>) {
    let reports = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--provider", "existing", "--context", context])
        .args(["--controller", "openkruise@v1.9.0", "--labels", "seed"])
        .arg("--report-dir")
        .arg(reports.path())
        .env("KUBECONFIG", kubeconfig)
        .env("HARNESS_STATE_DIR", state.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(
        &std::fs::read(reports.path().join("latest").join("report.json")).unwrap(),
    )
    .unwrap();
    let (mut passed, mut skipped) = (vec![], vec![]);
    for r in report["results"].as_array().unwrap() {
        let name = r["scenario"].as_str().unwrap().to_string();
        let o = &r["outcome"];
        match (o["result"].as_str(), o["kind"].as_str()) {
            (Some("judged"), Some("pass")) => passed.push(name),
            (Some("skipped"), _) => {
                let why = o["reason"].as_str().unwrap_or_default().to_string();
                assert!(
                    why.starts_with("needs what this existing cluster lacks: "),
                    "{name} skipped without naming what is missing: {r}"
                );
                skipped.push((name, why));
            }
            _ => panic!("{name}: {o}: {r}"),
        }
    }
    (passed, skipped)
}

#[test]
#[ignore = "nightly tier: a kind cluster on the offline node image, minutes on two cores"]
fn the_existing_provider_runs_the_seeds_on_a_kind_cluster_and_deletes_only_its_namespaces() {
    use k8s_openapi::api::core::v1::{Namespace, Node};
    use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
    use std::io::BufRead;
    if !common::private_docker_possible() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    // The user's cluster: kind with OpenKruise installed, as `cluster up` keeps it running.
    let mut up = Up(Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["cluster", "up", "--provider", "kind", "--kind-offline"])
        .args(["--name", "users", "--controller", "openkruise@v1.9.0"])
        .env("HARNESS_STATE_DIR", state.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap());
    let mut line = String::new();
    std::io::BufReader::new(up.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let kubeconfig = std::path::PathBuf::from(line.trim());
    assert!(kubeconfig.is_file(), "cluster up printed {line:?}");
    let context = kube::config::Kubeconfig::read_from(&kubeconfig)
        .unwrap()
        .current_context
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(client(&kubeconfig));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // A namespace of the user's, which the runs must leave alone.
    let mine: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "users-own"}})).unwrap();
    rt.block_on(namespaces.create(&PostParams::default(), &mine))
        .unwrap();

    // As created, no node carries the scenario layout's labels: every seed is skipped,
    // naming them, and none fails for the cluster's sake.
    let (passed, skipped) = existing_seeds(&kubeconfig, &context);
    assert!(passed.is_empty(), "{passed:?}");
    assert!(skipped.len() >= 6, "{skipped:?}");
    for (name, why) in &skipped {
        assert!(why.contains("node-type="), "{name}: {why}");
    }

    // Labelled as the layout asks (the first half of the workers stable, the rest elastic),
    // the seeds that need no gate run and pass; those needing a gate the cluster runs
    // without are skipped naming it.
    let nodes: Api<Node> = Api::all(client);
    let mut workers: Vec<String> = rt
        .block_on(nodes.list(&ListParams::default()))
        .unwrap()
        .items
        .into_iter()
        .filter(|n| {
            !n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("node-role.kubernetes.io/control-plane"))
        })
        .filter_map(|n| n.metadata.name)
        .collect();
    workers.sort();
    assert!(workers.len() >= 2, "{workers:?}");
    let half = workers.len() / 2;
    for (i, w) in workers.iter().enumerate() {
        let pool = if i < half { "stable" } else { "elastic" };
        let patch = serde_json::json!({"metadata": {"labels": {"node-type": pool}}});
        rt.block_on(nodes.patch(w, &PatchParams::default(), &Patch::Merge(&patch)))
            .unwrap();
    }
    let (passed, skipped) = existing_seeds(&kubeconfig, &context);
    for want in [
        "workloadspread/cloneset-volume-claim-templates",
        "workloadspread/deployment-priority-class-patch",
        "daemonset/advanced-daemonset-selector-is-immutable",
        "daemonset/advanced-daemonset-selector-is-immutable-yaml",
    ] {
        assert!(passed.iter().any(|p| p == want), "{want}: {passed:?}");
    }
    let why = |name: &str| {
        skipped
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, w)| w.clone())
            .unwrap_or_else(|| panic!("{name} not skipped: {skipped:?}"))
    };
    assert!(
        why("cloneset/recreate-pods-and-pvcs-on-image-and-template-change")
            .contains("RecreatePodWhenChangeVCTInCloneSetGate")
    );
    assert!(
        why("sidecarset/in-place-update-with-injected-sidecar")
            .contains("InPlacePodVerticalScaling")
    );

    // Its own namespaces are gone, the user's is not.
    let left = rt
        .block_on(namespaces.list(&ListParams::default().labels("conformance-harness/owner")))
        .unwrap();
    let left: Vec<_> = left
        .items
        .into_iter()
        .filter(|n| n.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating"))
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    rt.block_on(namespaces.get("users-own")).unwrap();

    drop(up);
    let left = left_in(state.path());
    assert!(left.is_empty(), "left behind: {left:#?}");
}

/// The upstream suite's kind-only spec on kind: it stops two worker node containers with
/// `docker stop` on the host (the daemon the nodes run in, a private one here), waits for them
/// to turn NotReady, rolls a DaemonSet out past them, starts them again and waits for every
/// node and pod to be Ready. It passes, and the run leaves nothing behind.
#[test]
#[ignore = "nightly tier: a kind cluster on the offline node image and a node-stopping spec, minutes on two cores"]
fn the_upstream_suite_s_kind_only_spec_stops_and_starts_kind_s_nodes_and_passes() {
    if !common::private_docker_possible() {
        return;
    }
    const SPEC: &str = "should ignore not ready nodes during rolling update";
    let (outcomes, code, left) = upstream_on_kind(SPEC);
    let ran: Vec<_> = outcomes.iter().filter(|(k, _)| k.contains(SPEC)).collect();
    assert_eq!(ran.len(), 1, "the spec ran once: {outcomes:#?}");
    assert_eq!(ran[0].1, "pass", "{outcomes:#?}");
    assert_eq!(code, Some(0), "{outcomes:#?}");
    assert!(left.is_empty(), "left behind: {left:#?}");
}

/// `harness run --provider kind --kind-offline --upstream-e2e --focus <focus>`: each result's
/// outcome (`pass`, `skipped`, ...), the exit code, and what is left after it.
fn upstream_on_kind(focus: &str) -> (BTreeMap<String, String>, Option<i32>, Vec<String>) {
    let (report, code, left) = run(&[
        "--provider",
        "kind",
        "--kind-offline",
        "--upstream-e2e",
        "--focus",
        focus,
    ]);
    let outcomes = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let o = &r["outcome"];
            (
                r["scenario"].as_str().unwrap().to_string(),
                o["kind"]
                    .as_str()
                    .or(o["result"].as_str())
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    (outcomes, code, left)
}
