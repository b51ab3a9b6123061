//! Pure functions that turn a component and version into a [`GoRecipe`].

use super::go::{GoBuildStep, GoRecipe, GoVersion, go_directive};
use super::versions::KubeVersion;

/// The control-plane binaries built from `k8s.io/kubernetes`.
pub const KUBERNETES_BINARIES: &[&str] = &[
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "etcd",
];

/// The recipe for the Kubernetes binaries and etcd at `version`, given the text of
/// `k8s.io/kubernetes`'s own `go.mod` at that version.
///
/// The generated module requires `k8s.io/kubernetes` and replaces every staging module
/// (`k8s.io/<m> => ./staging/src/k8s.io/<m>` upstream) with its published `v0.<minor>.<patch>`,
/// which is why `go install …@v` cannot be used. etcd comes from the same module graph.
pub fn kubernetes(version: &KubeVersion, upstream_go_mod: &str) -> GoRecipe {
    let staging = staging_modules(upstream_go_mod);
    let mut go_mod = String::from("module harness.local/build/kubernetes\n\n");
    let min_go = go_directive(upstream_go_mod).unwrap_or(GoVersion(1, 20, 0));
    go_mod.push_str(&format!("go {min_go}\n\n"));
    for line in upstream_go_mod.lines() {
        if line.starts_with("godebug ") {
            go_mod.push_str(line);
            go_mod.push('\n');
        }
    }
    go_mod.push_str(&format!(
        "\nrequire k8s.io/kubernetes {}\n\nreplace (\n",
        version.tag()
    ));
    for m in &staging {
        go_mod.push_str(&format!("\t{m} => {m} {}\n", version.staging_tag()));
    }
    go_mod.push_str(")\n");

    let tag = version.tag();
    let mut ldflags = vec!["-s".to_string(), "-w".to_string()];
    for pkg in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        for (var, value) in [
            ("gitVersion", tag.clone()),
            ("gitMajor", version.major.to_string()),
            ("gitMinor", version.minor.to_string()),
            ("gitTreeState", "clean".to_string()),
            ("buildDate", "1970-01-01T00:00:00Z".to_string()),
        ] {
            ldflags.push(format!("-X {pkg}.{var}={value}"));
        }
    }
    GoRecipe {
        go_mod,
        steps: vec![
            GoBuildStep {
                packages: [
                    "kube-apiserver",
                    "kube-controller-manager",
                    "kube-scheduler",
                    "kubectl",
                ]
                .iter()
                .map(|c| format!("k8s.io/kubernetes/cmd/{c}"))
                .collect(),
                output: "./".into(),
                test: false,
            },
            GoBuildStep {
                packages: vec!["go.etcd.io/etcd/server/v3".into()],
                output: "etcd".into(),
                test: false,
            },
        ],
        ldflags: ldflags.join(" "),
        outputs: KUBERNETES_BINARIES.iter().map(|s| s.to_string()).collect(),
        nosum: vec![],
        min_go,
    }
}

/// The recipe for the kubelet at `version`: the same module graph as [`kubernetes`] (so the
/// Go build cache is shared), one binary. Cached apart so that a cached control plane is never
/// rebuilt for it.
pub fn kubelet(version: &KubeVersion, upstream_go_mod: &str) -> GoRecipe {
    let mut r = kubernetes(version, upstream_go_mod);
    r.steps = vec![GoBuildStep {
        packages: vec!["k8s.io/kubernetes/cmd/kubelet".into()],
        output: "kubelet".into(),
        test: false,
    }];
    r.outputs = vec!["kubelet".into()];
    r
}

/// The recipe for kubeadm and kube-proxy at `version` (a kind node's): the same module graph
/// as [`kubernetes`], cached apart like [`kubelet`].
pub fn kubeadm(version: &KubeVersion, upstream_go_mod: &str) -> GoRecipe {
    let mut r = kubernetes(version, upstream_go_mod);
    r.steps = vec![GoBuildStep {
        packages: vec![
            "k8s.io/kubernetes/cmd/kubeadm".into(),
            "k8s.io/kubernetes/cmd/kube-proxy".into(),
        ],
        output: "./".into(),
        test: false,
    }];
    r.outputs = vec!["kubeadm".into(), "kube-proxy".into()];
    r
}

/// The module of crictl.
pub const CRI_TOOLS_MODULE: &str = "sigs.k8s.io/cri-tools";

/// crictl at `version` (`go install …/cmd/crictl@version`, the module has no replaces),
/// stamped with its version.
pub fn crictl(version: &str, upstream_go_mod: &str) -> GoRecipe {
    let mut r = go_install(
        CRI_TOOLS_MODULE,
        &format!("{CRI_TOOLS_MODULE}/cmd/crictl"),
        version,
        "crictl",
        upstream_go_mod,
    );
    r.ldflags = format!("-s -w -X {CRI_TOOLS_MODULE}/pkg/version.Version={version}");
    r
}

/// A module installed with `go install <package>@<version>`, as kwok is.
pub fn go_install(
    module: &str,
    package: &str,
    version: &str,
    binary: &str,
    upstream_go_mod: &str,
) -> GoRecipe {
    GoRecipe {
        go_mod: format!(
            "module harness.local/build/{binary}\n\ngo {}\n\nrequire {module} {version}\n",
            go_directive(upstream_go_mod).unwrap_or(GoVersion(1, 20, 0))
        ),
        steps: vec![GoBuildStep {
            packages: vec![format!("{package}@{version}")],
            output: "install".into(),
            test: false,
        }],
        ldflags: "-s -w".into(),
        outputs: vec![binary.to_string()],
        nosum: vec![],
        min_go: go_directive(upstream_go_mod).unwrap_or(GoVersion(1, 20, 0)),
    }
}

/// The module of the CNCF distribution registry.
pub const REGISTRY_MODULE: &str = "github.com/distribution/distribution/v3";

/// The distribution registry at `version` (`go install …/cmd/registry@version`, the module has
/// no replaces), stamped with its version.
pub fn registry(version: &str, upstream_go_mod: &str) -> GoRecipe {
    let mut r = go_install(
        REGISTRY_MODULE,
        &format!("{REGISTRY_MODULE}/cmd/registry"),
        version,
        "registry",
        upstream_go_mod,
    );
    r.ldflags = format!("-s -w -X {REGISTRY_MODULE}/version.version={version}");
    r
}

/// The module of chainsaw.
pub const CHAINSAW_MODULE: &str = "github.com/kyverno/chainsaw";

/// Where in the build directory chainsaw's source is copied.
pub const CHAINSAW_SOURCE_DIR: &str = "chainsaw";

/// The file that gives chainsaw's test runner `ModulePath` (relative to its module).
pub const CHAINSAW_SHIM_FILE: &str = "pkg/runner/internal/zz_harness_module_path.go";

/// The first Go whose `testing.MainStart` asks its dependencies for `ModulePath`.
pub const CHAINSAW_SHIM_FROM: GoVersion = GoVersion(1, 25, 0);

/// The one method chainsaw's `internal.TestDeps` lacks for Go 1.25 and later (the module
/// path is what `go test` reports for coverage; chainsaw runs no coverage).
pub const CHAINSAW_MODULE_PATH_SHIM: &str = "package internal\n\n// ModulePath is asked of a test main's dependencies from Go 1.25 on.\nfunc (*TestDeps) ModulePath() string { return \"\" }\n";

/// chainsaw at `version`, its main package built from the module's source copied to
/// [`CHAINSAW_SOURCE_DIR`] (a `replace` directive points there), on the module's own graph.
pub fn chainsaw(version: &str, upstream_go_mod: &str) -> GoRecipe {
    let min_go = go_directive(upstream_go_mod).unwrap_or(GoVersion(1, 20, 0));
    GoRecipe {
        go_mod: format!(
            "module harness.local/build/chainsaw\n\ngo {min_go}\n\nrequire {CHAINSAW_MODULE} {version}\n\nreplace {CHAINSAW_MODULE} => ./{CHAINSAW_SOURCE_DIR}\n"
        ),
        steps: vec![GoBuildStep {
            packages: vec![CHAINSAW_MODULE.into()],
            output: "chainsaw".into(),
            test: false,
        }],
        ldflags: "-s -w".into(),
        outputs: vec!["chainsaw".into()],
        nosum: vec![],
        min_go,
    }
}

/// The static programs of the harness images (`pause`, `health`): a module without
/// dependencies whose sources the caller writes to `pause/main.go` and `health/main.go`.
pub fn image_programs() -> GoRecipe {
    GoRecipe {
        go_mod: "module harness.local/images\n\ngo 1.22\n".into(),
        steps: ["pause", "health"]
            .iter()
            .map(|p| GoBuildStep {
                packages: vec![format!("./{p}")],
                output: p.to_string(),
                test: false,
            })
            .collect(),
        ldflags: "-s -w".into(),
        outputs: vec!["pause".into(), "health".into()],
        nosum: vec![],
        min_go: GoVersion(1, 22, 0),
    }
}

/// A module whose main package is at its root (a controller manager such as
/// `github.com/openkruise/kruise`), built with a generated `go.mod` that requires it at `version`
/// and copies its own `replace` directives (replacements of local paths are dropped: they cannot
/// resolve outside the module's repository).
pub fn module_main(
    module: &str,
    version: &str,
    binary: &str,
    upstream_go_mod: &str,
    nosum: bool,
) -> GoRecipe {
    module_package(module, module, version, binary, upstream_go_mod, nosum)
}

/// [`module_main`] for a main package elsewhere in the module (a node daemon such as
/// `github.com/openkruise/kruise/cmd/daemon`): the same generated `go.mod`, so the manager and
/// the daemon of one release share their module graph and Go's build cache.
pub fn module_package(
    module: &str,
    package: &str,
    version: &str,
    binary: &str,
    upstream_go_mod: &str,
    nosum: bool,
) -> GoRecipe {
    let min_go = go_directive(upstream_go_mod).unwrap_or(GoVersion(1, 20, 0));
    let mut go_mod = format!(
        "module harness.local/build/{binary}\n\ngo {min_go}\n\nrequire {module} {version}\n"
    );
    let replaces = replace_directives(upstream_go_mod);
    if !replaces.is_empty() {
        go_mod.push_str("\nreplace (\n");
        for r in replaces {
            go_mod.push_str(&format!("\t{r}\n"));
        }
        go_mod.push_str(")\n");
    }
    GoRecipe {
        go_mod,
        steps: vec![GoBuildStep {
            packages: vec![package.to_string()],
            output: binary.to_string(),
            test: false,
        }],
        ldflags: "-s -w".into(),
        outputs: vec![binary.to_string()],
        nosum: if nosum {
            vec![module.to_string()]
        } else {
            vec![]
        },
        min_go,
    }
}

/// [`module_package`] for the test binary of a package (`go test -c`): a controller's own
/// end-to-end suite, such as `github.com/openkruise/kruise/test/e2e`, built against the
/// release's module graph.
pub fn module_test(
    module: &str,
    package: &str,
    version: &str,
    binary: &str,
    upstream_go_mod: &str,
    nosum: bool,
) -> GoRecipe {
    let mut r = module_package(module, package, version, binary, upstream_go_mod, nosum);
    r.steps[0].test = true;
    r
}

/// Every `replace` directive of a go.mod (single-line and block form), without the keyword,
/// skipping replacements by local paths.
pub fn replace_directives(go_mod: &str) -> Vec<String> {
    let mut out = vec![];
    let mut in_block = false;
    for raw in go_mod.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if in_block {
            if line == ")" {
                in_block = false;
                continue;
            }
        } else if line == "replace (" {
            in_block = true;
            continue;
        } else if let Some(rest) = line.strip_prefix("replace ") {
            out.push(rest.trim().to_string());
            continue;
        } else {
            continue;
        }
        if !line.is_empty() {
            out.push(line.to_string());
        }
    }
    out.retain(|r| {
        r.split_once("=>")
            .is_some_and(|(_, to)| !to.trim().starts_with("./") && !to.trim().starts_with("../"))
    });
    out
}

/// The staging modules a `k8s.io/kubernetes` go.mod replaces with `./staging/src/...`.
pub fn staging_modules(upstream_go_mod: &str) -> Vec<String> {
    let mut out: Vec<String> = upstream_go_mod
        .lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches("replace ").trim();
            let (from, to) = l.split_once("=>")?;
            to.trim()
                .starts_with("./staging/")
                .then(|| from.trim().to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_main_copies_the_replace_block_and_drops_local_paths() {
        let upstream = "module github.com/openkruise/kruise\n\ngo 1.22\n\nrequire (\n\tk8s.io/api v0.30.0\n)\n\nreplace (\n\tk8s.io/api => k8s.io/api v0.30.10 // pinned\n\tgithub.com/x/y => ./third_party/y\n)\n\nreplace golang.org/x/net => golang.org/x/net v0.23.0\n";
        let r = module_main(
            "github.com/openkruise/kruise",
            "v1.9.0",
            "kruise-manager",
            upstream,
            true,
        );
        assert!(
            r.go_mod
                .contains("require github.com/openkruise/kruise v1.9.0\n")
        );
        assert!(r.go_mod.contains("\tk8s.io/api => k8s.io/api v0.30.10\n"));
        assert!(
            r.go_mod
                .contains("\tgolang.org/x/net => golang.org/x/net v0.23.0\n")
        );
        assert!(!r.go_mod.contains("third_party"));
        assert_eq!(r.nosum, ["github.com/openkruise/kruise"]);
        assert_eq!(r.steps[0].packages, ["github.com/openkruise/kruise"]);
        assert_eq!(r.outputs, ["kruise-manager"]);
    }

    #[test]
    fn module_package_builds_a_command_of_the_module_with_the_same_go_mod() {
        let upstream = "module github.com/openkruise/kruise\n\ngo 1.22\n\nreplace k8s.io/api => k8s.io/api v0.30.10\n";
        let module = "github.com/openkruise/kruise";
        let daemon = module_package(
            module,
            "github.com/openkruise/kruise/cmd/daemon",
            "v1.9.0",
            "kruise-daemon",
            upstream,
            true,
        );
        let manager = module_main(module, "v1.9.0", "kruise-daemon", upstream, true);
        assert_eq!(daemon.go_mod, manager.go_mod);
        assert_eq!(
            daemon.steps[0].packages,
            ["github.com/openkruise/kruise/cmd/daemon"]
        );
        assert_eq!(daemon.outputs, ["kruise-daemon"]);
        assert_eq!(daemon.nosum, [module]);
        assert!(!daemon.steps[0].test && !manager.steps[0].test);
        // The e2e suite: a test binary of its package, on the same module graph.
        let e2e = module_test(
            module,
            "github.com/openkruise/kruise/test/e2e",
            "v1.9.0",
            "kruise-e2e.test",
            upstream,
            true,
        );
        assert_eq!(
            e2e.go_mod.replace("kruise-e2e.test", "kruise-daemon"),
            daemon.go_mod
        );
        assert!(e2e.steps[0].test);
        assert_eq!(
            e2e.steps[0].packages,
            ["github.com/openkruise/kruise/test/e2e"]
        );
        assert_eq!(e2e.outputs, ["kruise-e2e.test"]);
    }

    #[test]
    fn registry_recipe_installs_the_command_with_its_version() {
        let r = registry(
            "v3.1.2",
            "module github.com/distribution/distribution/v3\n\ngo 1.26.0\n",
        );
        assert_eq!(
            r.steps[0].packages,
            ["github.com/distribution/distribution/v3/cmd/registry@v3.1.2"]
        );
        assert_eq!(r.outputs, ["registry"]);
        assert!(
            r.ldflags
                .contains("-X github.com/distribution/distribution/v3/version.version=v3.1.2")
        );
        assert_eq!(r.min_go, GoVersion(1, 26, 0));
    }

    #[test]
    fn chainsaw_is_built_from_its_local_copy_on_its_own_graph() {
        let r = chainsaw(
            "v0.2.12",
            "module github.com/kyverno/chainsaw\n\ngo 1.23.0\n",
        );
        assert!(
            r.go_mod
                .contains("require github.com/kyverno/chainsaw v0.2.12\n")
        );
        assert!(
            r.go_mod
                .contains("replace github.com/kyverno/chainsaw => ./chainsaw\n")
        );
        assert_eq!(r.steps[0].packages, ["github.com/kyverno/chainsaw"]);
        assert_eq!(r.min_go, GoVersion(1, 23, 0));
        assert!(CHAINSAW_MODULE_PATH_SHIM.contains("func (*TestDeps) ModulePath() string"));
    }

    #[test]
    fn image_programs_build_each_program_to_its_own_name() {
        let r = image_programs();
        assert_eq!(r.steps.len(), 2);
        assert_eq!(r.steps[1].packages, ["./health"]);
        assert_eq!(r.steps[1].output, "health");
        assert!(r.nosum.is_empty());
    }

    const UPSTREAM: &str = "module k8s.io/kubernetes\n\ngo 1.23.0\n\ngodebug default=go1.23\n\ngodebug winsymlink=0\n\nrequire (\n\tk8s.io/api v0.0.0\n)\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n";

    #[test]
    fn kubernetes_recipe_replaces_every_staging_module_with_its_release() {
        let v: KubeVersion = "1.32".parse().unwrap();
        let r = kubernetes(&v, UPSTREAM);
        assert!(r.go_mod.contains("require k8s.io/kubernetes v1.32.5"));
        assert!(r.go_mod.contains("\tk8s.io/api => k8s.io/api v0.32.5\n"));
        assert!(
            r.go_mod
                .contains("\tk8s.io/client-go => k8s.io/client-go v0.32.5\n")
        );
        assert!(!r.go_mod.contains("github.com/x/y"));
        assert!(r.go_mod.contains("godebug default=go1.23\n"));
        assert_eq!(r.min_go, GoVersion(1, 23, 0));
    }

    #[test]
    fn kubernetes_recipe_stamps_the_true_version() {
        let v: KubeVersion = "1.32".parse().unwrap();
        let r = kubernetes(&v, UPSTREAM);
        assert!(
            r.ldflags
                .contains("-X k8s.io/component-base/version.gitVersion=v1.32.5")
        );
        assert!(
            r.ldflags
                .contains("-X k8s.io/client-go/pkg/version.gitMinor=32")
        );
        assert_eq!(r.outputs.len(), 5);
    }

    #[test]
    fn kubeadm_recipe_builds_kubeadm_and_kube_proxy_on_the_same_graph() {
        let v: KubeVersion = "1.32".parse().unwrap();
        let (k, kubeadm) = (kubernetes(&v, UPSTREAM), kubeadm(&v, UPSTREAM));
        assert_eq!(k.go_mod, kubeadm.go_mod);
        assert_eq!(k.ldflags, kubeadm.ldflags, "stamped with the true version");
        assert_eq!(
            kubeadm.steps[0].packages,
            [
                "k8s.io/kubernetes/cmd/kubeadm",
                "k8s.io/kubernetes/cmd/kube-proxy"
            ]
        );
        assert_eq!(kubeadm.outputs, ["kubeadm", "kube-proxy"]);
    }

    #[test]
    fn crictl_recipe_installs_the_command_with_its_version() {
        let r = crictl("v1.34.0", "module sigs.k8s.io/cri-tools\n\ngo 1.24.0\n");
        assert_eq!(
            r.steps[0].packages,
            ["sigs.k8s.io/cri-tools/cmd/crictl@v1.34.0"]
        );
        assert!(
            r.ldflags
                .contains("-X sigs.k8s.io/cri-tools/pkg/version.Version=v1.34.0")
        );
        assert_eq!(r.outputs, ["crictl"]);
    }

    #[test]
    fn kubelet_recipe_shares_the_module_graph_and_builds_one_binary() {
        let v: KubeVersion = "1.32".parse().unwrap();
        let (k, kubelet) = (kubernetes(&v, UPSTREAM), kubelet(&v, UPSTREAM));
        assert_eq!(k.go_mod, kubelet.go_mod);
        assert_eq!(k.ldflags, kubelet.ldflags);
        assert_eq!(kubelet.steps.len(), 1);
        assert_eq!(kubelet.steps[0].packages, ["k8s.io/kubernetes/cmd/kubelet"]);
        assert_eq!(kubelet.outputs, ["kubelet"]);
    }
}
