//! Golden files: the command lines of every local-cluster component, as `cluster up --dry-run`
//! prints them. Set `HARNESS_UPDATE_GOLDEN=1` to rewrite them after an intended change.

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
