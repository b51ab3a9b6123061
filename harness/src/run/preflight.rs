//! What a run is asked for, checked before its plan is printed or anything starts, so that a
//! dry run refuses what the real start would fail on: the Ginkgo regular expressions of
//! `--focus` and `--skip` with `--upstream-e2e`, the controller's release tag (among the
//! versions its Go module proxy lists), and the controller gates the planned scenarios turn on
//! (among the gates that version declares). What cannot be checked (no Go, no network) is a
//! warning, and the run goes on. Start with [`check`].

use std::time::Duration;

use super::upstream::Choice;
use super::{Filter, plan};
use crate::controller::ControllerRef;
use crate::scenario::Scenario;
use crate::toolchain::{GoEnv, KubeVersion};

/// How long the Go command may take to list releases or fetch a release's sources.
pub const GO_TIMEOUT: Duration = Duration::from_secs(120);

/// What a run asks for that it cannot have.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// A `--focus` or `--skip` of the upstream suite that is not a regular expression.
    #[error(
        "use --{flag} `{given}`: with --upstream-e2e it is a regular expression over the spec \
         texts, and this one does not parse"
    )]
    Regex {
        /// `focus` or `skip`.
        flag: &'static str,
        /// The expression given.
        given: String,
        /// Why it does not parse.
        #[source]
        source: Box<regex::Error>,
    },
    /// A release tag the controller's module does not have.
    #[error("use {controller}: there is no release {tag}; the releases are {known}")]
    UnknownRelease {
        /// The controller asked for.
        controller: String,
        /// The tag asked for.
        tag: String,
        /// The releases there are.
        known: String,
    },
    /// A controller gate the controller's version does not declare.
    #[error(
        "use controller gate `{gate}` (asked for by {scenario}): {controller} has no such gate; \
         its gates are {known}"
    )]
    UnknownGate {
        /// The gate.
        gate: String,
        /// A scenario that asks for it.
        scenario: String,
        /// The controller.
        controller: String,
        /// The gates it has.
        known: String,
    },
}

/// What a run asks for.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The cell's Kubernetes version.
    pub kubernetes: KubeVersion,
    /// The controller under test.
    pub controller: &'a ControllerRef,
    /// The scenarios to select from.
    pub scenarios: &'a [Scenario],
    /// Which of them.
    pub filter: &'a Filter,
    /// The upstream suite run instead of the scenarios, if any.
    pub upstream: Option<&'a Choice>,
}

/// Checks `request`; what could not be checked comes back as warnings (lines to print).
pub async fn check(request: &Request<'_>) -> Result<Vec<String>, PreflightError> {
    check_regexes(request.upstream)?;
    let go = GoEnv::detect().await.map_err(|e| e.to_string());
    check_with(request, go.as_ref(), GO_TIMEOUT).await
}

/// With `--upstream-e2e`, `--focus` and `--skip` are Ginkgo's regular expressions.
fn check_regexes(upstream: Option<&Choice>) -> Result<(), PreflightError> {
    let Some(choice) = upstream else {
        return Ok(());
    };
    let flags = choice
        .focus
        .iter()
        .map(|f| ("focus", f))
        .chain(choice.skip.iter().map(|s| ("skip", s)));
    for (flag, given) in flags {
        if let Err(e) = regex::Regex::new(given) {
            return Err(PreflightError::Regex {
                flag,
                given: given.clone(),
                source: Box::new(e),
            });
        }
    }
    Ok(())
}

/// [`check`] after the regular expressions, with `go` (or why there is none), each Go command
/// bounded by `timeout`.
async fn check_with(
    request: &Request<'_>,
    go: Result<&GoEnv, &String>,
    timeout: Duration,
) -> Result<Vec<String>, PreflightError> {
    let mut warnings = vec![];
    let go = match go {
        Ok(go) => go,
        Err(e) => {
            warnings.push(format!(
                "the controller's release and gates are not checked: {e}"
            ));
            return Ok(warnings);
        }
    };
    let mut references = vec![request.controller];
    references.extend(request.upstream.and_then(|u| u.from.as_ref()));
    let releases: Vec<&ControllerRef> = references.into_iter().filter(|r| r.is_release()).collect();
    if let Some(first) = releases.first() {
        match bounded(timeout, first.releases(go)).await {
            Ok(known) => {
                for r in &releases {
                    if !known.contains(&r.version) {
                        return Err(PreflightError::UnknownRelease {
                            controller: r.to_string(),
                            tag: r.version.clone(),
                            known: known.join(", "),
                        });
                    }
                }
            }
            Err(e) => {
                // The list refused: each tag is asked for by itself, so that an unknown one is
                // still refused before any work.
                let scratch = tempfile::tempdir().ok();
                let dir = scratch
                    .as_ref()
                    .map_or(std::path::Path::new("/"), |d| d.path());
                for r in &releases {
                    let module = r.family().module();
                    let asked = go.module_version_info(dir, module, &r.version);
                    match tokio::time::timeout(timeout, asked).await {
                        Ok(Ok(None)) => {}
                        Ok(Ok(Some(why))) => {
                            return Err(PreflightError::UnknownRelease {
                                controller: r.to_string(),
                                tag: r.version.clone(),
                                known: format!(
                                    "not listed here (the list: {e}), and {module}@{} is not \
                                     served either: {why}",
                                    r.version
                                ),
                            });
                        }
                        Ok(Err(_)) | Err(_) => warnings.push(format!(
                            "the releases of {} could not be listed, so {} is not checked \
                             against them: {e}",
                            first.kind.name(),
                            r.version
                        )),
                    }
                }
            }
        }
    }
    // The upstream suite runs with the gates its release's own manifest sets.
    if request.upstream.is_none() {
        check_gates(request, go, timeout, &mut warnings).await?;
    }
    Ok(warnings)
}

/// The gates the plan turns on (a gate the planner leaves out for the release is not asked
/// for) must be among the gates the controller's version declares.
async fn check_gates(
    request: &Request<'_>,
    go: &GoEnv,
    timeout: Duration,
    warnings: &mut Vec<String>,
) -> Result<(), PreflightError> {
    let planned = plan(
        request.scenarios,
        request.filter,
        request.kubernetes,
        request.controller,
    );
    let mut asked: Vec<(&String, &str)> = vec![];
    for cluster in &planned.clusters {
        for gate in cluster.controller_gates.keys() {
            let by = cluster
                .scenarios
                .iter()
                .find(|name| {
                    request.scenarios.iter().any(|s| {
                        s.name == name.as_str() && s.requires.controller_gates.contains_key(gate)
                    })
                })
                .map_or("a scenario", String::as_str);
            if !asked.iter().any(|(g, _)| *g == gate) {
                asked.push((gate, by));
            }
        }
    }
    if asked.is_empty() {
        return Ok(());
    }
    let controller = request.controller;
    let known = match bounded(timeout, controller.known_gates(go)).await {
        Ok(known) => known,
        Err(e) => {
            warnings.push(format!(
                "the gates of {controller} could not be read, so the scenarios' controller gates \
                 are not checked: {e}"
            ));
            return Ok(());
        }
    };
    match asked.into_iter().find(|(g, _)| !known.contains(g)) {
        None => Ok(()),
        Some((gate, scenario)) => Err(PreflightError::UnknownGate {
            gate: gate.clone(),
            scenario: scenario.to_string(),
            controller: controller.to_string(),
            known: known.join(", "),
        }),
    }
}

/// An error with its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(&format!(": {c}"));
        cause = c.source();
    }
    out
}

/// `f` within `timeout`, its error or the timeout as text (a warning's detail).
async fn bounded<T, E: std::error::Error>(
    timeout: Duration,
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(chain(&e)),
        Err(_) => Err(format!("no answer from the Go command after {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolchain::GoVersion;
    use futures::FutureExt;

    /// A declaration of gates as a release's `kruise_features.go` writes it.
    const FEATURES: &str = "package features\n\nconst (\n\
        \t// A comment.\n\tPodWebhook featuregate.Feature = \"PodWebhook\"\n\
        \tEnhancedLivenessProbeGate featuregate.Feature = \"EnhancedLivenessProbe\"\n\
        \tUntyped = \"UntypedGate\"\n)\n\n\
        var defaultFeatureGates = map[featuregate.Feature]featuregate.FeatureSpec{\n\
        \tPodWebhook:        {Default: true, PreRelease: featuregate.Beta},\n\
        \tEnhancedLivenessProbeGate: {Default: false, PreRelease: featuregate.Alpha},\n\
        \tUntyped: {Default: false, PreRelease: featuregate.Alpha},\n}\n";

    /// A stand-in `go` in `dir`: `list -m -versions` prints `versions` (or fails when it is
    /// `None`), `mod download -json` gives a module whose features file is [`FEATURES`].
    fn stand_in_go(dir: &std::path::Path, versions: Option<&str>) -> GoEnv {
        let module = dir.join("module");
        std::fs::create_dir_all(module.join("pkg/features")).unwrap();
        std::fs::write(
            module.join("go.mod"),
            "module github.com/openkruise/kruise\n",
        )
        .unwrap();
        std::fs::write(
            module.join(crate::controller::openkruise::FEATURES),
            FEATURES,
        )
        .unwrap();
        let list = match versions {
            Some(v) => format!("echo 'github.com/openkruise/kruise {v}'"),
            None => "echo 'reading the list: 403 Forbidden' >&2; exit 1".into(),
        };
        // `list -m -json module@tag`: only v1.9.0 is served (the others: 404).
        let info = "case \"$4\" in *@v1.9.0) echo '{}' ;; *) echo \"$4: reading .info: 404 Not \
            Found\" >&2; exit 1 ;; esac";
        let go = crate::testing::script(
            dir,
            "go",
            &format!(
                "case \"$1 $3\" in\n'list -json') {info} ;;\nlist*) {list} ;;\nmod*) printf '{{\"Dir\":\"{m}\",\"GoMod\":\"{m}/go.mod\"}}' ;;\nesac\n",
                m = module.display()
            ),
        );
        GoEnv {
            go,
            version: GoVersion(1, 26, 0),
        }
    }

    fn scenarios() -> Vec<Scenario> {
        let body = |_| async { Ok(()) }.boxed();
        vec![
            Scenario::new("a/plain", "x", &[], body),
            Scenario::new("a/probes", "x", &[], body).with_controller_gate("EnhancedLivenessProbe"),
            Scenario::new("b/typo", "x", &[], body).with_controller_gate("PodWebhok"),
            // A gate the planner leaves out for releases before v1.7.0.
            Scenario::new("b/vct", "x", &[], body)
                .with_controller_gate("RecreatePodWhenChangeVCTInCloneSetGate"),
        ]
    }

    async fn check_on(
        controller: &str,
        suites: &[&str],
        upstream: Option<&Choice>,
        go: &GoEnv,
    ) -> Result<Vec<String>, PreflightError> {
        let controller: ControllerRef = controller.parse().unwrap();
        let all = scenarios();
        let filter = Filter {
            suites: suites.iter().map(|s| s.to_string()).collect(),
            ..Filter::default()
        };
        let request = Request {
            kubernetes: KubeVersion::default_version(),
            controller: &controller,
            scenarios: &all,
            filter: &filter,
            upstream,
        };
        check_regexes(request.upstream)?;
        check_with(&request, Ok(go), Duration::from_secs(30)).await
    }

    #[tokio::test]
    async fn an_upstream_regex_that_does_not_parse_names_its_flag() {
        let dir = tempfile::tempdir().unwrap();
        let go = stand_in_go(dir.path(), Some("v1.9.0"));
        let choice = Choice {
            focus: vec!["CloneSet".into()],
            skip: vec!["scale (in".into()],
            ..Choice::default()
        };
        let err = check_on("openkruise@v1.9.0", &[], Some(&choice), &go)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("--skip `scale (in`"), "{text}");
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("unclosed group"), "{cause}");
        // Scenario names are matched as text, not as regular expressions.
        let err = check_on("openkruise@v1.9.0", &["a"], None, &go).await;
        assert!(err.is_ok(), "{err:?}");
    }

    #[tokio::test]
    async fn a_release_the_module_does_not_list_is_refused_with_the_ones_it_does() {
        let dir = tempfile::tempdir().unwrap();
        let go = stand_in_go(dir.path(), Some("v1.8.0 v1.9.0-rc.1 v1.9.0"));
        let text = check_on("openkruise@v9.9.9", &["a"], None, &go)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("openkruise@v9.9.9: there is no release v9.9.9")
                && text.contains("the releases are v1.8.0, v1.9.0-rc.1, v1.9.0"),
            "{text}"
        );
        assert!(
            check_on("openkruise@v1.9.0-rc.1", &["a"], None, &go)
                .await
                .unwrap()
                .is_empty()
        );
        // So is the release of the upstream suite asked for.
        let choice = Choice {
            from: Some("openkruise@v1.9.1".parse().unwrap()),
            ..Choice::default()
        };
        let text = check_on("openkruise@v1.9.0", &[], Some(&choice), &go)
            .await
            .unwrap_err()
            .to_string();
        assert!(text.contains("no release v1.9.1"), "{text}");
        // A commit is not a release: it is not looked up (a list that fails says nothing).
        let other = tempfile::tempdir().unwrap();
        let failing = stand_in_go(other.path(), None);
        let warnings = check_on("openkruise@4c2bbcec", &["a"], None, &failing).await;
        assert!(warnings.as_ref().is_ok_and(Vec::is_empty), "{warnings:?}");
    }

    #[tokio::test]
    async fn a_list_that_cannot_be_had_checks_the_tag_itself() {
        let dir = tempfile::tempdir().unwrap();
        let go = stand_in_go(dir.path(), None);
        // The tag asked for is served: no warning, no refusal.
        let warnings = check_on("openkruise@v1.9.0", &["a"], None, &go)
            .await
            .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        // One that is not is refused before any work, saying both answers.
        let err = check_on("openkruise@v9.9.9", &["a"], None, &go)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("use openkruise@v9.9.9: there is no release v9.9.9")
                && err.contains("403 Forbidden")
                && err.contains("404 Not Found"),
            "{err}"
        );
        // A go command that cannot even be started for it: a warning, as before.
        let broken = GoEnv {
            go: dir.path().join("no-such-go"),
            version: GoVersion(1, 26, 0),
        };
        let warnings = check_on("openkruise@v9.9.9", &["a"], None, &broken)
            .await
            .unwrap();
        assert!(
            warnings[0].contains("v9.9.9 is not checked"),
            "{warnings:?}"
        );
        let no_go = "find Go: no go on PATH".to_string();
        let controller: ControllerRef = "openkruise@v9.9.9".parse().unwrap();
        let request = Request {
            kubernetes: KubeVersion::default_version(),
            controller: &controller,
            scenarios: &[],
            filter: &Filter::default(),
            upstream: None,
        };
        let warnings = check_with(&request, Err(&no_go), Duration::from_secs(1))
            .await
            .unwrap();
        assert!(warnings[0].contains("no go on PATH"), "{warnings:?}");
    }

    #[tokio::test]
    async fn a_gate_the_version_does_not_declare_is_refused_with_the_ones_it_does() {
        let dir = tempfile::tempdir().unwrap();
        let go = stand_in_go(dir.path(), Some("v1.6.0 v1.9.0"));
        let text = check_on("openkruise@v1.9.0", &["b"], None, &go)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("controller gate `PodWebhok` (asked for by b/typo)")
                && text.contains(
                    "its gates are AllAlpha, AllBeta, EnhancedLivenessProbe, PodWebhook, UntypedGate"
                ),
            "{text}"
        );
        let ok = check_on("openkruise@v1.9.0", &["a"], None, &go).await;
        assert!(ok.as_ref().is_ok_and(Vec::is_empty), "{ok:?}");
    }

    #[tokio::test]
    async fn a_gate_the_planner_leaves_out_is_not_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let go = stand_in_go(dir.path(), Some("v1.6.0 v1.9.0"));
        let all = scenarios();
        let controller: ControllerRef = "openkruise@v1.6.0".parse().unwrap();
        let filter = Filter {
            focus: vec!["b/vct".into()],
            ..Filter::default()
        };
        let request = Request {
            kubernetes: KubeVersion::default_version(),
            controller: &controller,
            scenarios: &all,
            filter: &filter,
            upstream: None,
        };
        let ok = check_with(&request, Ok(&go), Duration::from_secs(30)).await;
        assert!(ok.as_ref().is_ok_and(Vec::is_empty), "{ok:?}");
    }
}
