//! What a run selects: [`Selection`] is the scenario selection of `run`, `matrix`, `qualify`
//! and `coverage` (suites, names, labels; or chainsaw tests; or the controller's own e2e
//! suite), turned into the catalog to select from ([`Selection::catalog`]), a [`Filter`] and
//! the upstream suite asked for ([`Selection::upstream`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};

use super::Filter;
use super::upstream::Choice;
use crate::scenario::Scenario;

/// Which scenarios a command selects.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these suites.
    pub suites: Vec<String>,
    /// Only scenarios whose name contains one of these (with the upstream suite: Ginkgo focus
    /// regexes).
    pub focus: Vec<String>,
    /// Not scenarios whose name contains one of these (with the upstream suite: Ginkgo skip
    /// regexes).
    pub skip: Vec<String>,
    /// Only scenarios with one of these labels.
    pub labels: Vec<String>,
    /// chainsaw test files or directories to run instead of the catalog.
    pub chainsaw: Vec<PathBuf>,
    /// With chainsaw tests: chainsaw's configuration file and values files.
    pub chainsaw_settings: crate::chainsaw::Settings,
    /// Run the controller release's own end-to-end suite instead of the catalog.
    pub upstream_e2e: bool,
    /// With the upstream suite: another release's suite on every cell.
    pub upstream_e2e_from: Option<String>,
    /// With the upstream suite: real nodes as the suite's only workers.
    pub upstream_real_nodes: usize,
    /// With the upstream suite: parallel Ginkgo processes.
    pub upstream_procs: u16,
}

impl Selection {
    /// The scenarios to select from: the chainsaw tests given, or the built-in catalog.
    pub fn catalog(&self) -> anyhow::Result<Vec<Scenario>> {
        if self.chainsaw.is_empty() {
            return Ok(crate::suites::all());
        }
        let tests = crate::chainsaw::load(&self.chainsaw).context("load chainsaw tests")?;
        for f in self
            .chainsaw_settings
            .config
            .iter()
            .chain(&self.chainsaw_settings.values)
        {
            if !f.is_file() {
                bail!("chainsaw settings: {} is not a file", f.display());
            }
        }
        Ok(tests
            .into_iter()
            .map(|t| crate::chainsaw::scenario(t, &self.chainsaw_settings))
            .collect())
    }

    /// The upstream suite asked for (`--upstream-e2e`, `--upstream-e2e-from`), if any; refuses
    /// it beside chainsaw tests or the scenario selectors it cannot honour.
    pub fn upstream(&self) -> anyhow::Result<Option<Choice>> {
        if !self.upstream_e2e && self.upstream_e2e_from.is_none() {
            if self.upstream_real_nodes > 0 {
                bail!(
                    "--upstream-real-nodes shapes the cluster of --upstream-e2e; add --upstream-e2e"
                );
            }
            if self.upstream_procs > 1 {
                bail!("--upstream-procs runs the suite of --upstream-e2e; add --upstream-e2e");
            }
            return Ok(None);
        }
        if !self.chainsaw.is_empty() {
            bail!("--chainsaw and --upstream-e2e pick different suites; give one of them");
        }
        if !self.suites.is_empty() || !self.labels.is_empty() {
            bail!(
                "--suite and --labels select harness scenarios; with --upstream-e2e use --focus \
                 and --skip (Ginkgo regexes over the spec texts)"
            );
        }
        let from = match &self.upstream_e2e_from {
            Some(r) => Some(r.parse()?),
            None => None,
        };
        Ok(Some(Choice {
            from,
            focus: self.focus.clone(),
            skip: self.skip.clone(),
            real_nodes: self.upstream_real_nodes,
            procs: self.upstream_procs.into(),
        }))
    }

    /// The filter over the catalog.
    pub fn filter(&self) -> Filter {
        Filter {
            suites: self.suites.clone(),
            focus: self.focus.clone(),
            skip: self.skip.clone(),
            labels: self.labels.clone(),
        }
    }
}

/// The scenarios `spec` (`HARNESS_INJECT_FAILURES`, if set) makes fail on purpose, checked
/// against the scenarios `all` (see [`super::RunOptions::inject_failures`]); `say` gets a note
/// when any is.
pub fn injected_failures(
    spec: Option<&str>,
    all: &[Scenario],
    say: &dyn Fn(String),
) -> anyhow::Result<BTreeMap<String, usize>> {
    let Some(spec) = spec else {
        return Ok(Default::default());
    };
    let parsed = super::parse_injected_failures(spec)
        .map_err(|e| anyhow::anyhow!("read HARNESS_INJECT_FAILURES: {e}"))?;
    if let Some(unknown) = parsed
        .keys()
        .find(|n| !all.iter().any(|s| s.name == n.as_str()))
    {
        bail!(
            "read HARNESS_INJECT_FAILURES: there is no scenario `{unknown}` (see `harness run --list`)"
        );
    }
    if !parsed.is_empty() {
        say(format!(
            "note: HARNESS_INJECT_FAILURES makes these scenarios fail on purpose: {spec}"
        ));
    }
    Ok(parsed)
}

/// `HARNESS_INJECT_FAILURES` from the environment.
pub fn injected_failures_from_env(
    all: &[Scenario],
    say: &dyn Fn(String),
) -> anyhow::Result<BTreeMap<String, usize>> {
    let spec = std::env::var("HARNESS_INJECT_FAILURES").ok();
    injected_failures(spec.as_deref(), all, say)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream() -> Selection {
        Selection {
            upstream_e2e: true,
            ..Selection::default()
        }
    }

    #[test]
    fn the_upstream_suite_refuses_what_it_cannot_honour() {
        let e = |s: Selection| s.upstream().unwrap_err().to_string();
        assert!(
            e(Selection {
                upstream_real_nodes: 1,
                ..Selection::default()
            })
            .contains("add --upstream-e2e")
        );
        assert!(
            e(Selection {
                upstream_procs: 2,
                ..Selection::default()
            })
            .contains("--upstream-procs runs the suite")
        );
        assert!(
            e(Selection {
                chainsaw: vec!["t".into()],
                ..upstream()
            })
            .contains("pick different suites")
        );
        assert!(
            e(Selection {
                labels: vec!["l".into()],
                ..upstream()
            })
            .contains("use --focus and --skip")
        );
        assert!(Selection::default().upstream().unwrap().is_none());
    }

    #[test]
    fn the_upstream_choice_carries_the_ginkgo_selection() {
        let c = Selection {
            focus: vec!["CloneSet".into()],
            skip: vec!["Serial".into()],
            upstream_e2e_from: Some("openkruise@v1.9.1".into()),
            upstream_real_nodes: 2,
            upstream_procs: 4,
            ..Selection::default()
        }
        .upstream()
        .unwrap()
        .unwrap();
        assert_eq!(c.from.unwrap().to_string(), "openkruise@v1.9.1");
        assert_eq!(
            (c.focus, c.skip),
            (vec!["CloneSet".into()], vec!["Serial".into()])
        );
        assert_eq!((c.real_nodes, c.procs), (2, 4));
    }

    #[test]
    fn the_filter_takes_the_scenario_selectors() {
        let f = Selection {
            suites: vec!["a".into()],
            focus: vec!["f".into()],
            skip: vec!["s".into()],
            labels: vec!["l".into()],
            ..Selection::default()
        }
        .filter();
        assert_eq!(
            (f.suites, f.focus, f.skip, f.labels),
            (
                vec!["a".into()],
                vec!["f".into()],
                vec!["s".into()],
                vec!["l".into()]
            )
        );
    }

    #[test]
    fn injected_failures_name_existing_scenarios() {
        let all = crate::suites::all();
        let quiet = |_: String| {};
        assert!(injected_failures(None, &all, &quiet).unwrap().is_empty());
        let e = injected_failures(Some("no/such=1"), &all, &quiet).unwrap_err();
        assert!(e.to_string().contains("no scenario `no/such`"), "{e}");
        let name = all[0].name.to_string();
        let noted = std::cell::RefCell::new(vec![]);
        let say = |l: String| noted.borrow_mut().push(l);
        let spec = format!("{name}=2");
        let got = injected_failures(Some(&spec), &all, &say).unwrap();
        assert_eq!(got.get(&name), Some(&2));
        assert_eq!(noted.borrow().len(), 1);
    }
}
