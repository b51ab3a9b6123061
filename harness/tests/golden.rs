//! Golden files: what `cluster up --dry-run` prints for every provider (the local components'
//! command lines, the kind config and commands, the k3s container, the existing context), and
//! the checked-in kind-configs/. Set `HARNESS_UPDATE_GOLDEN=1` to rewrite the golden files
//! after an intended change.

use std::path::{Path, PathBuf};

use harness::cluster::Profile;
use harness::cluster::local::components::{self, Binaries, Inputs, Layout, Ports};
use harness::toolchain::KubeVersion;

fn check(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("HARNESS_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "read {}: {e} (HARNESS_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    assert_eq!(
        expected,
        actual,
        "{} differs; rerun with HARNESS_UPDATE_GOLDEN=1 if the change is intended",
        path.display()
    );
}

fn render(profile: &Profile) -> String {
    // Unstable values (cluster dir, binary paths, ports) are fixed placeholders.
    let layout = Layout::new("/CLUSTER");
    let ports = Ports {
        etcd_client: 1001,
        etcd_peer: 1002,
        apiserver: 1003,
        controller_manager: 1004,
        scheduler: 1005,
        kwok: 1006,
    };
    let bin = |n: &str| PathBuf::from(format!("/BIN/{n}"));
    let binaries = Binaries {
        etcd: bin("etcd"),
        apiserver: bin("kube-apiserver"),
        controller_manager: bin("kube-controller-manager"),
        scheduler: bin("kube-scheduler"),
        kwok: bin("kwok"),
        harness: bin("harness"),
        real: None,
    };
    components::all(Inputs {
        layout: &layout,
        ports: &ports,
        profile,
        binaries: &binaries,
    })
    .iter()
    .map(ToString::to_string)
    .collect::<Vec<_>>()
    .join("\n")
}

#[test]
fn default_profile_command_lines() {
    check(
        "local-default.txt",
        &render(&Profile::new(KubeVersion::default_version())),
    );
}

#[test]
fn gated_profile_command_lines() {
    let mut p = Profile::new(KubeVersion::default_version());
    p.add_gates(&["InPlacePodVerticalScaling=true"]).unwrap();
    p.add_runtime_config(&["api/all=true"]).unwrap();
    check("local-in-place-vertical-scaling.txt", &render(&p));
}

fn gated() -> Profile {
    let mut p = Profile::new(KubeVersion::default_version());
    p.add_gates(&["InPlacePodVerticalScaling=true"]).unwrap();
    p.add_runtime_config(&["api/all=true"]).unwrap();
    p
}

/// What `cluster up --provider kind --dry-run` prints: the config and the kind commands.
fn kind_dry_run(profile: &Profile) -> String {
    harness::cluster::kind::KindProvider::plan_with(
        Path::new("kind"),
        "harness",
        profile,
        Path::new("/STATE/kind/harness"),
        Path::new("/STATE/logs"),
        std::time::Duration::from_secs(300),
    )
    .unwrap()
    .to_string()
}

#[test]
fn kind_dry_runs() {
    check(
        "kind-default.txt",
        &kind_dry_run(&Profile::new(KubeVersion::default_version())),
    );
    check(
        "kind-in-place-vertical-scaling.txt",
        &kind_dry_run(&gated()),
    );
}

#[test]
fn k3s_dry_run() {
    check(
        "k3s-in-place-vertical-scaling.txt",
        &harness::cluster::k3s::dry_run(&gated()),
    );
}

#[test]
fn existing_dry_run() {
    let p = harness::cluster::existing::ExistingProvider {
        kubeconfig: "/HOME/.kube/config".into(),
        context: "staging".into(),
        server: Some("https://10.0.0.1:6443".into()),
        root: "/STATE/existing".into(),
    };
    check("existing.txt", &(p.plan("harness").join("\n") + "\n"));
}

/// kind-configs/ holds exactly what the profiles generate: regenerate with
/// `harness cluster configs`.
#[test]
fn kind_configs_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kind-configs");
    let files = harness::run::kind_configs(&harness::suites::all()).unwrap();
    assert!(files.len() >= 2, "default and in-place profiles: {files:?}");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut generated: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    generated.sort();
    assert_eq!(
        on_disk, generated,
        "kind-configs/ has other files than the profiles; run `harness cluster configs`"
    );
    for (name, text) in files {
        let current = std::fs::read_to_string(dir.join(&name)).unwrap();
        assert_eq!(
            current, text,
            "kind-configs/{name} is stale; run `harness cluster configs`"
        );
    }
}
