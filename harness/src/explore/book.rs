//! What an exploration keeps as it goes: [`Book`] (start there) sorts findings into new ones and
//! repeats, and writes each as shrinking and confirming left it.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::oracle::Finding;
use super::shrinking::{Pending, Shrunk, alike};
use super::subject::Subject;
use super::trial::Trial;
use super::{Options, Reported, Summary, output, pace};

/// The report directory's log of behaviour trials ([`Book::log_trial`]).
pub const TRIALS_LOG: &str = "behaviour-trials.jsonl";

/// What an exploration keeps as it goes: the summary it writes (counts, findings, pace), the
/// findings seen and not written yet, its clock, and who hears progress.
pub(super) struct Book<'a> {
    pub(super) options: &'a Options,
    pub(super) started: Instant,
    pub(super) summary: Summary,
    /// Findings seen and not written yet (waiting to be shrunk, or being shrunk).
    pub(super) held: Vec<Held>,
    pub(super) say: &'a (dyn Fn(String) + Sync),
    /// The log of behaviour trials ([`TRIALS_LOG`]), opened at the first.
    pub(super) trials_log: Option<std::fs::File>,
}

/// A finding seen and not written yet: the times other trials fired it again, and the other
/// keys they fired it with ([`Reported::also`]).
pub(super) struct Held {
    pub(super) finding: Finding,
    pub(super) repeats: usize,
    pub(super) also: Vec<String>,
}

/// Adds `key` to `also` unless it is `own` or there already.
fn stood_for(also: &mut Vec<String>, own: &str, key: &str) {
    if key != own && !also.iter().any(|k| k == key) {
        also.push(key.to_string());
    }
}

impl Book<'_> {
    pub(super) fn left(&self) -> Duration {
        self.options.budget.saturating_sub(self.started.elapsed())
    }

    /// Appends behaviour trial `t` (`carried` from another subject or not), which ran for
    /// `seconds` and fired `findings`, to the run's log of behaviour trials
    /// ([`TRIALS_LOG`] in the report directory): a JSON line each, its steps as `trial.yaml`
    /// has them and its findings' keys, so that what a run tried can be read back, not only
    /// counted.
    pub(super) fn log_trial(
        &mut self,
        t: &Trial,
        carried: bool,
        seconds: f64,
        findings: &[Finding],
    ) -> anyhow::Result<()> {
        use std::io::Write;
        let line = serde_json::json!({
            "subject": t.subject,
            "index": t.index,
            "carried": carried,
            "seconds": (seconds * 10.0).round() / 10.0,
            "steps": t.steps,
            "findings": findings.iter().map(|f| format!("{} {}", f.oracle.short(), f.key)).collect::<Vec<_>>(),
        });
        let path = self.options.dir.join(TRIALS_LOG);
        let f = match &mut self.trials_log {
            Some(f) => f,
            None => {
                std::fs::create_dir_all(&self.options.dir)?;
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .with_context(|| format!("open {}", path.display()))?;
                self.trials_log.insert(f)
            }
        };
        writeln!(f, "{line}").with_context(|| format!("append to {}", path.display()))
    }

    pub(super) fn count(&mut self, what: String, n: usize) {
        *self.summary.trials.entry(what).or_default() += n;
    }

    /// The time shrinking and confirming may still take: what is left of their share, and of
    /// the budget.
    pub(super) fn shrink_left(&self) -> Duration {
        Duration::from_secs_f64(self.summary.pace.shrink_left()).min(self.left())
    }

    /// Of `findings`, fired by `trial` of `s` (which took `seconds`, with the controller's log
    /// window `manager_log`), the new ones, to shrink; each other is counted as a repeat of
    /// the one it is alike ([`alike`]), written or held.
    pub(super) fn sort(
        &mut self,
        s: &Subject,
        trial: &Trial,
        seconds: Duration,
        findings: Vec<Finding>,
        manager_log: &str,
    ) -> Vec<Pending> {
        let mut new = vec![];
        for f in findings {
            if self.repeat(&f) {
                continue;
            }
            let first_seen = self.started.elapsed().as_secs_f64();
            (self.say)(format!(
                "[{:>5.0}s] {} {} {}: {}",
                first_seen,
                f.oracle.short(),
                s.name,
                f.key,
                f.observed.lines().next().unwrap_or_default()
            ));
            self.held.push(Held {
                finding: f.clone(),
                repeats: 0,
                also: vec![],
            });
            new.push(Pending {
                subject: s.clone(),
                finding: f,
                trial: trial.clone(),
                seconds,
                first_seen,
                manager_log: manager_log.to_string(),
            });
        }
        new
    }

    /// Whether `f` is one this run already holds (reported, being shrunk, or reported by an
    /// earlier cell): the same oracle, subject and key. Nothing is counted.
    pub(super) fn holds(&self, f: &Finding) -> bool {
        let same = |o: &Finding| super::shrinking::same(o, f);
        self.options.known.iter().any(same)
            || self.summary.findings.iter().any(|r| same(&r.finding))
            || self.held.iter().any(|h| same(&h.finding))
    }

    /// Whether `f` is alike a finding written or held: then counted as its repeat, and its
    /// key kept among the ones that finding stood for; or alike one an earlier cell of the
    /// run reported ([`Options::known`]): then counted as such.
    pub(super) fn repeat(&mut self, f: &Finding) -> bool {
        if self.options.known.iter().any(|k| alike(k, f)) {
            self.summary.pace.earlier += 1;
            return true;
        }
        let written = self
            .summary
            .findings
            .iter_mut()
            .find(|r| alike(&r.finding, f));
        if let Some(r) = written {
            stood_for(&mut r.also, &r.finding.key, &f.key);
            let name = r.dir.file_name().unwrap_or_default().to_string_lossy();
            let record = self.summary.pace.findings.entry(name.into_owned());
            record.or_default().repeats += 1;
            return true;
        }
        match self.held.iter_mut().find(|h| alike(&h.finding, f)) {
            Some(h) => {
                h.repeats += 1;
                stood_for(&mut h.also, &h.finding.key, &f.key);
                true
            }
            None => false,
        }
    }

    /// Writes a finding as shrinking and confirming left it (see [`output`]), and counts what
    /// they cost.
    pub(super) fn write(&mut self, done: Shrunk) -> anyhow::Result<()> {
        let p = done.pending;
        let at = self.held.iter().position(|h| alike(&h.finding, &p.finding));
        let (repeats, seen) = at.map_or((0, vec![]), |i| {
            let h = self.held.remove(i);
            (h.repeats, h.also)
        });
        let fired = p.finding.key.clone();
        let (finding, manager_log) = done.hit.unwrap_or((p.finding, p.manager_log));
        let mut also = vec![];
        for k in std::iter::once(&fired).chain(&seen) {
            stood_for(&mut also, &finding.key, k);
        }
        let s = p.subject;
        let n = self.summary.findings.len() + 1;
        let name = format!(
            "{n:02}-{}-{}",
            finding.oracle.short(),
            s.name.to_lowercase()
        );
        let dir = self.options.dir.join("findings").join(&name);
        let confirmed = done.confirm_runs > 0;
        let r = Reported {
            finding,
            original: p.trial,
            trial: done.trial,
            reproduced: done.reproduced,
            confirm_runs: done.confirm_runs,
            stable: confirmed && done.reproduced == done.confirm_runs,
            first_seen: p.first_seen,
            dir: dir.clone(),
            controller: self.options.controller.to_string(),
            kubernetes: self.options.kubernetes.to_string(),
            baseline: self.options.baseline.as_ref().map(ToString::to_string),
            gates: self.options.gates.clone(),
            also,
        };
        output::write_finding(&dir, &s, &r, &self.options.controller, &manager_log)?;
        let shrunk = done.candidates > 0;
        (self.say)(match (shrunk, confirmed) {
            (_, false) if done.cut > 0 => format!(
                "         {}, not confirmed: {} of its confirming runs were cut at the end of \
                 shrinking's share before they fired it, and every other fired it; `harness \
                 explore --replay {}` confirms it",
                match shrunk {
                    true => format!(
                        "shrunk to {} step(s), {} field(s) in {} runs",
                        r.trial.steps.len(),
                        r.trial.fields().len(),
                        done.candidates
                    ),
                    false => "not shrunk".to_string(),
                },
                done.cut,
                dir.display()
            ),
            (true, false) => format!(
                "         shrunk to {} step(s), {} field(s) in {} runs, not confirmed: its \
                 confirming runs no longer fit in what is left of shrinking's share ({:.0} s); \
                 `harness explore --replay {}` confirms it",
                r.trial.steps.len(),
                r.trial.fields().len(),
                done.candidates,
                (self.shrink_left().as_secs_f64() - done.shrinking).max(0.0),
                dir.display()
            ),
            (false, false) => format!(
                "         written as it fired, neither shrunk nor confirmed: its confirming runs \
                 (about {:.0} s, as long as its trial) do not fit in what is left of the budget \
                 and of shrinking's share of it ({:.0} s); `harness explore --replay {}` does \
                 both",
                p.seconds.as_secs_f64(),
                self.shrink_left().as_secs_f64(),
                dir.display()
            ),
            (true, true) => format!(
                "         shrunk to {} step(s), {} field(s) in {} runs; reproduced {}/{} → {}",
                r.trial.steps.len(),
                r.trial.fields().len(),
                done.candidates,
                r.reproduced,
                r.confirm_runs,
                dir.display()
            ),
            (false, true) => format!(
                "         not shrunk (no time left for candidates); reproduced {}/{} → {}",
                r.reproduced,
                r.confirm_runs,
                dir.display()
            ),
        });
        let pace = &mut self.summary.pace;
        pace.shrinking += done.shrinking;
        pace.confirming += done.confirming;
        pace.findings.insert(
            name,
            pace::FindingPace {
                shrinking: done.shrinking,
                confirming: done.confirming,
                candidates: done.candidates,
                shrunk,
                confirmed,
                repeats,
                cut: done.cut,
            },
        );
        self.summary.findings.push(r);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::oracle::Oracle;
    use crate::explore::select;
    use crate::explore::trial::{Fields, Mode, Step};

    #[test]
    fn a_finding_fired_again_is_counted_as_a_repeat_not_shrunk_again() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new(
            crate::toolchain::versions::DEFAULT_KUBERNETES
                .parse()
                .unwrap(),
            "openkruise@v1.9.0".parse().unwrap(),
            1,
            Duration::from_secs(100),
            dir.path().to_path_buf(),
        );
        let heard = std::sync::Mutex::new(vec![]);
        let say = |line: String| heard.lock().unwrap().push(line);
        let mut book = Book {
            options: &options,
            started: Instant::now(),
            summary: Summary::default(),
            held: vec![],
            say: &say,
            trials_log: None,
        };
        let s = select(&["CloneSet".to_string()]).unwrap().remove(0);
        let trial = Trial {
            subject: s.name.to_string(),
            mode: Mode::Admission,
            seed: 1,
            index: 0,
            steps: vec![Step::Create { set: Fields::new() }],
        };
        let finding = |key: &str| Finding {
            oracle: Oracle::Native,
            subject: s.name.to_string(),
            key: key.into(),
            observed: "o".into(),
            expected: "e".into(),
        };
        let second = Duration::from_secs(1);
        let new = book.sort(
            &s,
            &trial,
            second,
            vec![finding("admits x on create of a")],
            "",
        );
        assert_eq!(new.len(), 1);
        // Fired again while it waits, at the other verb too: counted, not new.
        let again = vec![
            finding("admits x on create of a"),
            finding("admits x on update of a"),
        ];
        assert!(book.sort(&s, &trial, second, again, "").is_empty());
        let p = new.into_iter().next().unwrap();
        book.write(Shrunk::not(p)).unwrap();
        assert!(book.held.is_empty());
        // And once written.
        let more = vec![finding("admits x on create of a"), finding("admits y")];
        assert_eq!(book.sort(&s, &trial, second, more, "").len(), 1);
        let r = &book.summary.findings[0];
        assert_eq!((r.confirm_runs, r.stable), (0, false));
        // The key it stood for at the other verb is kept, its own is not repeated.
        assert_eq!(r.also, ["admits x on update of a"]);
        let record = &book.summary.pace.findings["01-O4-cloneset"];
        assert_eq!(record.repeats, 3);
        assert!(!record.shrunk && !record.confirmed);
        assert!(r.dir.join("trial.yaml").exists());
        let heard = heard.lock().unwrap().join("\n");
        assert!(heard.contains("harness explore --replay"), "{heard}");
        // A later cell of the same run knows it: counted there, not new.
        let later = Options {
            known: vec![finding("admits x on create of a")],
            ..options.clone()
        };
        let quiet = |_: String| {};
        let mut book = Book {
            options: &later,
            started: Instant::now(),
            summary: Summary::default(),
            held: vec![],
            say: &quiet,
            trials_log: None,
        };
        let fired = vec![finding("admits x on update of a"), finding("admits z")];
        let new = book.sort(&s, &trial, second, fired, "");
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].finding.key, "admits z");
        assert_eq!(book.summary.pace.earlier, 1);
    }
}
