//! What a suite's specs need from the cell: [`unservable`] is where to start. It reads each
//! planned spec's body ([`spec_body`]) and names those the cell cannot serve ([`unmet`] by its
//! [`Capabilities`]) as [`Unservable`], which the suite then skips ([`skipping`], [`skipped`]);
//! [`await_suite_needs`] waits for what the suite expects before it starts.

use std::path::{Path, PathBuf};

use super::{UpstreamSuite, results::result};
use crate::results::{Outcome, ScenarioResult};
use crate::run::ginkgo::{self, SpecState};

/// What a cell can serve that upstream specs may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// OpenKruise's node daemon runs (the cell has real nodes).
    pub node_daemon: bool,
    /// The nodes are kind's containers, which a spec can stop with `docker` on the host as
    /// upstream's CI does (the kind provider).
    pub node_containers: bool,
}

/// How a spec's body runs `docker` on the host (to stop a kind node's container).
const HOST_DOCKER: &str = "exec.Command(\"docker\"";

/// The text of the spec node written at `line` (1-based) of `source`: from that line to the
/// brace that closes the first block opened there (the spec's function body).
pub fn spec_body(source: &str, line: u64) -> Option<&str> {
    let start: usize = source
        .split_inclusive('\n')
        .take(line.checked_sub(1)? as usize)
        .map(str::len)
        .sum();
    let rest = source.get(start..)?;
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return Some(&rest[..=i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Why a spec whose body is `body` cannot run on a cell with `caps`, if it cannot: it uses an
/// API only the node daemon serves (one of `daemon_kinds`) and the cell has no daemon, or it
/// runs `docker` on the host to stop a node and the cell's nodes are not kind's containers.
pub fn unmet(body: &str, caps: Capabilities, daemon_kinds: &[&str]) -> Option<String> {
    if !caps.node_daemon
        && let Some(kind) = daemon_kinds.iter().find(|k| body.contains(*k))
    {
        return Some(format!(
            "needs the node daemon (it uses {kind}); the cell has no real node"
        ));
    }
    if !caps.node_containers && body.contains(HOST_DOCKER) {
        return Some(
            "needs kind's node containers (it runs `docker` on the host to stop a node); the \
             cell's nodes are not containers"
                .into(),
        );
    }
    None
}

/// A spec the cell cannot serve: its full text and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unservable {
    /// The spec's name ([`ginkgo::Spec::name`]).
    pub name: String,
    /// Its full text (what Ginkgo's regexes match).
    pub text: String,
    /// Why.
    pub reason: String,
}

/// The flag by which a Kubernetes-style e2e framework (OpenKruise's among them) says that each
/// spec, once it has made its namespace, waits for that namespace's default ServiceAccount
/// (a reflector on ServiceAccounts) before it starts.
pub const VERIFY_SERVICE_ACCOUNT_FLAG: &str = "e2e-verify-service-account";

/// Whether the suite whose `--help` is `help` waits for a new namespace's default
/// ServiceAccount in each spec: it has [`VERIFY_SERVICE_ACCOUNT_FLAG`] (on by default in the
/// frameworks that have it; Go's `--help` does not print a boolean's default).
pub fn waits_for_service_accounts(help: &str) -> bool {
    help.lines().any(|l| {
        l.trim_start()
            .trim_start_matches('-')
            .split_whitespace()
            .next()
            == Some(VERIFY_SERVICE_ACCOUNT_FLAG)
    })
}

/// Waits, bounded by `timeout`, until what the suite's specs need when they start is served:
/// when the suite waits for each namespace's default ServiceAccount (read from its `--help`,
/// see [`waits_for_service_accounts`]), a namespace made now gets one (the controller manager's
/// service-account controller runs), as the suite's first spec will ask; the namespace is then
/// deleted. A cell whose controller manager lags makes the suite's first specs wait on it.
pub async fn await_suite_needs(
    binary: &Path,
    client: &kube::Client,
    timeout: std::time::Duration,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let help = crate::toolchain::help_text(binary)
        .await
        .unwrap_or_default();
    if !waits_for_service_accounts(&help) {
        return Ok(());
    }
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let ns = namespaces
        .create(
            &Default::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"generateName": "harness-suite-ready-"}
            }))?,
        )
        .await?;
    let name = ns.metadata.name.unwrap_or_default();
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), &name);
    let waited = crate::wait::poll(
        &format!("the default ServiceAccount of a new namespace ({name}), which every spec of the suite waits for"),
        timeout,
        std::time::Duration::from_millis(200),
        || async {
            match accounts.get_opt("default").await {
                Ok(Some(_)) => crate::wait::Check::Met,
                Ok(None) => crate::wait::Check::Pending("no ServiceAccount default yet".into()),
                Err(e) => crate::wait::Check::Failed(format!("get ServiceAccount default: {e}")),
            }
        },
    )
    .await;
    let _ = namespaces.delete(&name, &Default::default()).await;
    Ok(waited?)
}

/// The specs `suite` would run (a dry run of `binary` in `work`: nothing runs), with their
/// locations.
pub async fn planned(
    binary: &Path,
    suite: &UpstreamSuite,
    work: &Path,
) -> anyhow::Result<Vec<ginkgo::Spec>> {
    use anyhow::Context;
    let report = work.join("ginkgo-dry-run.json");
    let mut args = suite.args(&report);
    args.push("--ginkgo.dry-run".into());
    let out = tokio::process::Command::new(binary)
        .args(&args)
        .current_dir(work)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .with_context(|| format!("dry-run {}", binary.display()))?;
    let text = std::fs::read_to_string(&report).with_context(|| {
        format!(
            "the upstream suite's dry run ({}) wrote no report: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    // A dry run passes the specs it would run; those focus and skip leave out are skipped.
    Ok(ginkgo::parse(&text)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .filter(|s| s.state == SpecState::Passed)
        .collect())
}

/// What [`unservable`] found: the specs a cell cannot serve, and the source files it could
/// not read (their specs run unchecked).
#[derive(Debug, Default)]
pub struct Checked {
    /// The specs the cell cannot serve.
    pub unservable: Vec<Unservable>,
    /// The files, as the suite names them, whose specs could not be checked.
    pub unread: std::collections::BTreeSet<String>,
}

impl Checked {
    /// A warning for the specs that could not be checked, if any: they run whatever the cell
    /// lacks, so a skip the user expects may silently not happen.
    pub fn warning(&self, modcache: &Path) -> Option<String> {
        let first = self.unread.first()?;
        Some(format!(
            "the source of {} file(s) of the suite's specs could not be read (first: {first}; \
             looked there and under {}): their specs run without the check for what the cell \
             lacks. A suite built with -trimpath from the module cache names them as \
             <module>@<version>/<file>; set GOMODCACHE if the cache is elsewhere",
            self.unread.len(),
            modcache.display()
        ))
    }
}

/// The Go module cache the suite's sources are read from: `GOMODCACHE`, else `~/go/pkg/mod`.
pub fn module_cache() -> PathBuf {
    std::env::var("GOMODCACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join("go/pkg/mod")
        })
}

/// The specs of `planned` that a cell with `caps` cannot serve, decided from each spec's own
/// source in the module it was built from (under `modcache`), and the files that could not be
/// read.
pub fn unservable(
    planned: &[ginkgo::Spec],
    caps: Capabilities,
    daemon_kinds: &[&str],
    modcache: &Path,
) -> Checked {
    let mut sources: std::collections::BTreeMap<String, Option<String>> = Default::default();
    let mut checked = Checked::default();
    for spec in planned {
        let Some((file, line)) = &spec.location else {
            continue;
        };
        let source = sources.entry(file.clone()).or_insert_with(|| {
            // Built with -trimpath: module paths are relative to the module cache.
            let p = Path::new(file);
            std::fs::read_to_string(p)
                .or_else(|_| std::fs::read_to_string(modcache.join(p)))
                .ok()
        });
        let Some(source) = source.as_deref() else {
            checked.unread.insert(file.clone());
            continue;
        };
        let Some(body) = spec_body(source, *line) else {
            continue;
        };
        if let Some(reason) = unmet(body, caps, daemon_kinds) {
            checked.unservable.push(Unservable {
                name: spec.name.clone(),
                text: spec.text.clone(),
                reason,
            });
        }
    }
    checked
}

/// `suite` with the specs in `unservable` skipped. Ginkgo matches a skip regex against the
/// suite's description, a space and the spec's full text, so each escaped full text is
/// anchored at the end and after that space (not at the start of the string).
pub fn skipping(suite: &UpstreamSuite, unservable: &[Unservable]) -> UpstreamSuite {
    let mut s = suite.clone();
    if !unservable.is_empty() {
        let names: Vec<String> = unservable
            .iter()
            .map(|u| format!(" {}$", regex::escape(&u.text)))
            .collect();
        s.skip.push(names.join("|"));
    }
    s
}

/// The results of specs skipped because the cell cannot serve them.
pub fn skipped(unservable: &[Unservable], profile: &str) -> Vec<ScenarioResult> {
    unservable
        .iter()
        .map(|u| {
            result(
                u.name.clone(),
                profile,
                Outcome::Skipped {
                    reason: u.reason.clone(),
                },
                None,
                0.0,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_that_verifies_service_accounts_says_so_in_its_help() {
        // As Go's flag package prints it.
        let help = "  -e2e-output-dir string\n    \tOutput directory (default \"/tmp\")\n  \
            -e2e-verify-service-account\n    \tIf true tests will verify the service account \
            before running. (default true)\n";
        assert!(waits_for_service_accounts(help));
        assert!(waits_for_service_accounts(
            "  -e2e-verify-service-account\n    \tIf true tests will verify ...\n"
        ));
        assert!(!waits_for_service_accounts(
            "  -ginkgo.v\n  -e2e-verify-service-accounts-x\n"
        ));
    }

    #[test]
    fn specs_whose_source_cannot_be_read_are_named_not_silently_passed() {
        let cache = tempfile::tempdir().unwrap();
        let module = cache.path().join("example.com/suite@v1.0.0");
        std::fs::create_dir_all(&module).unwrap();
        let src = "package e2e\n\nvar _ = Describe(\"x\", func() {\n\tIt(\"recreates\", func() {\n\t\tcrr := &appsv1alpha1.ContainerRecreateRequest{}\n\t})\n})\n";
        std::fs::write(module.join("a.go"), src).unwrap();
        let spec = |file: &str| ginkgo::Spec {
            name: format!("x recreates [{file}]"),
            text: "x recreates".into(),
            area: "x".into(),
            state: SpecState::Passed,
            seconds: 0.0,
            message: None,
            location: Some((file.into(), 4)),
        };
        let planned = [
            spec("example.com/suite@v1.0.0/a.go"),
            // A build that names its files without the module's version.
            spec("example.com/suite/a.go"),
        ];
        let caps = Capabilities {
            node_daemon: false,
            node_containers: false,
        };
        let checked = unservable(&planned, caps, &["ContainerRecreateRequest"], cache.path());
        assert_eq!(checked.unservable.len(), 1, "{checked:?}");
        assert_eq!(
            checked.unread.iter().collect::<Vec<_>>(),
            ["example.com/suite/a.go"]
        );
        let w = checked.warning(cache.path()).unwrap();
        assert!(
            w.contains("1 file(s)") && w.contains("example.com/suite/a.go"),
            "{w}"
        );
        let all_read = unservable(&planned[..1], caps, &[], cache.path());
        assert_eq!(all_read.warning(cache.path()), None);
    }

    #[test]
    fn a_spec_body_is_its_block_and_daemon_apis_need_a_daemon() {
        let src = "package e2e\n\nvar _ = Describe(\"x\", func() {\n\tIt(\"recreates\", func() {\n\t\tcrr := &appsv1alpha1.ContainerRecreateRequest{}\n\t\tif x { y() }\n\t})\n\tIt(\"scales\", func() {\n\t\tscale()\n\t})\n})\n";
        let first = spec_body(src, 4).unwrap();
        assert!(first.contains("ContainerRecreateRequest") && first.ends_with('}'));
        assert!(!first.contains("scale()"), "{first}");
        let second = spec_body(src, 8).unwrap();
        assert!(second.contains("scale()") && !second.contains("Recreate"));
        let kinds = &["ContainerRecreateRequest", "ImagePullJob"];
        let none = Capabilities {
            node_daemon: false,
            node_containers: false,
        };
        let daemon = Capabilities {
            node_daemon: true,
            ..none
        };
        assert!(
            unmet(first, none, kinds)
                .unwrap()
                .contains("needs the node daemon (it uses ContainerRecreateRequest)")
        );
        assert_eq!(unmet(first, daemon, kinds), None);
        assert_eq!(unmet(second, none, kinds), None);
        assert_eq!(spec_body(src, 0), None);
        // A spec that stops a node by stopping its kind container needs kind's nodes, real
        // nodes or not.
        let stops = "{\n\terr = exec.Command(\"docker\", \"stop\", node.Name).Run()\n}";
        for caps in [none, daemon] {
            assert!(
                unmet(stops, caps, kinds)
                    .unwrap()
                    .starts_with("needs kind's node containers (it runs `docker` on the host")
            );
        }
        let kind = Capabilities {
            node_containers: true,
            ..none
        };
        assert_eq!(unmet(stops, kind, kinds), None);
        assert!(unmet(first, kind, kinds).is_some());
        let suite = UpstreamSuite {
            from: "openkruise@v1.9.0".parse().unwrap(),
            focus: vec![],
            skip: vec![],
            procs: 1,
        };
        let skip = skipping(
            &UpstreamSuite {
                skip: vec!["Scaling".into()],
                ..suite
            },
            &[Unservable {
                name: "[apps] CRR recreates (a+b) [apps/v1beta1/crr.go]".into(),
                text: "[apps] CRR recreates (a+b)".into(),
                reason: "r".into(),
            }],
        );
        // As Ginkgo applies it: the skip strings joined by `|`, matched against the suite's
        // description, a space and the spec's full text.
        let ginkgo = regex::Regex::new(&skip.skip.join("|")).unwrap();
        let skipped = |text: &str| ginkgo.is_match(&format!("Kruise e2e suite {text}"));
        assert!(skipped("[apps] CRR recreates (a+b)"));
        assert!(skipped("Scaling up"));
        assert!(!skipped("[apps] CRR recreates (a+b) twice"));
        assert!(!skipped("[apps] CRR recreates aab"));
    }
}
