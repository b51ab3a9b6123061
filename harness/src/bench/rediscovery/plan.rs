//! What a rediscovery run explores: [`plan`] is where to start. It turns the [`List`] and a
//! [`Request`] into one [`Exploration`] per release, each the harness's own `explore` command
//! ([`explore_command`]), and [`render_plan`] prints them for a dry run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::{BUILTIN_PATH, List, RediscoveryError};
use crate::toolchain::versions::Version;

/// What to run (the flags of `harness bench rediscovery`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The list (default: the checked-in one).
    pub list: Option<PathBuf>,
    /// Each exploration's budget.
    pub budget: Duration,
    /// Each exploration's seed.
    pub seed: u64,
    /// Only these releases (default: every one the list names).
    pub releases: Vec<String>,
    /// Where the report goes (default: `reports/rediscovery-<time>`).
    pub out: Option<PathBuf>,
    /// Print the plan and run nothing.
    pub dry_run: bool,
    /// More flags of `explore`, the same for every exploration.
    pub explore_args: Vec<String>,
}

/// One exploration of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exploration {
    /// The release.
    pub release: String,
    /// The bugs to find there (indexes into [`List::bugs`]).
    pub find: Vec<usize>,
    /// The bugs fixed there, whose findings it must not show.
    pub clean: Vec<usize>,
}

/// Every exploration to run, oldest release first.
pub fn plan(list: &List, only: &[String]) -> Result<Vec<Exploration>, RediscoveryError> {
    let mut by: BTreeMap<Version, Exploration> = BTreeMap::new();
    for (i, b) in list.bugs.iter().enumerate() {
        let roles = std::iter::once((&b.bad, true)).chain(b.fixed.iter().map(|f| (f, false)));
        for (release, bad) in roles {
            // Checked by `List::check`: every release of a bug parses.
            let v: Version = release.parse().expect("a checked release");
            let e = by.entry(v).or_insert_with(|| Exploration {
                release: release.clone(),
                find: vec![],
                clean: vec![],
            });
            match bad {
                true => e.find.push(i),
                false => e.clean.push(i),
            }
        }
    }
    let all: Vec<Exploration> = by.into_values().collect();
    for r in only {
        if !all.iter().any(|e| &e.release == r) {
            return Err(RediscoveryError::UnknownRelease {
                release: r.clone(),
                known: all
                    .iter()
                    .map(|e| e.release.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(all
        .into_iter()
        .filter(|e| only.is_empty() || only.contains(&e.release))
        .collect())
}

/// A duration as the CLI takes it: `30m`, `1h`, `90s`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        _ if s > 0 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s > 0 && s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// The arguments of the harness's `explore` for `release` into `dir`: the defaults, with the
/// request's budget, seed and extra flags.
pub fn explore_command(list: &List, release: &str, request: &Request, dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "explore".to_string(),
        "--controller".into(),
        format!("{}@{release}", list.controller),
        "--budget".into(),
        duration(request.budget),
        "--seed".into(),
        request.seed.to_string(),
        "--report-dir".into(),
        dir.display().to_string(),
    ]
    .to_vec();
    args.extend(request.explore_args.iter().cloned());
    args
}

/// The command that reproduces `request`.
pub fn command(request: &Request) -> String {
    let mut words = vec!["harness".to_string(), "bench".into(), "rediscovery".into()];
    if let Some(l) = &request.list {
        words.extend(["--list".into(), l.display().to_string()]);
    }
    words.extend([
        "--budget".into(),
        duration(request.budget),
        "--seed".into(),
        request.seed.to_string(),
    ]);
    if !request.releases.is_empty() {
        words.extend(["--releases".into(), request.releases.join(",")]);
    }
    if !request.explore_args.is_empty() {
        words.push("--".into());
        words.extend(request.explore_args.iter().cloned());
    }
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

/// The plan as text: each exploration's command, the bugs to find and those to miss.
pub fn render_plan(list: &List, plan: &[Exploration], request: &Request, out: &Path) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let listed = request
        .list
        .as_ref()
        .map_or(format!("{BUILTIN_PATH} (built in)"), |p| {
            p.display().to_string()
        });
    let bugs: BTreeSet<usize> = plan
        .iter()
        .flat_map(|e| e.find.iter().chain(&e.clean))
        .copied()
        .collect();
    let _ = writeln!(s, "{}", command(request));
    let _ = writeln!(
        s,
        "list: {listed}; {} of its {} bugs, {} exploration(s) of {} each ({} of exploring, bring-up aside); report: {}",
        bugs.len(),
        list.bugs.len(),
        plan.len(),
        duration(request.budget),
        duration(request.budget * plan.len() as u32),
        out.display()
    );
    for e in plan {
        let dir = out.join(&e.release);
        let args = explore_command(list, &e.release, request, &dir);
        let _ = writeln!(
            s,
            "\n{}: harness {}",
            e.release,
            shlex::try_join(args.iter().map(String::as_str)).unwrap_or_else(|_| args.join(" "))
        );
        match e.find.len() {
            0 => s.push_str("  find: none\n"),
            n => {
                let _ = writeln!(s, "  find ({n}):");
            }
        }
        for &i in &e.find {
            let b = &list.bugs[i];
            let _ = writeln!(s, "    {}: {}", b.id, b.finding.describe());
        }
        if !e.clean.is_empty() {
            let _ = writeln!(s, "  fixed here, must not show ({}):", e.clean.len());
            for &i in &e.clean {
                let b = &list.bugs[i];
                let _ = writeln!(s, "    {} (bad on {})", b.id, b.bad);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::rediscovery::fixtures::*;

    #[test]
    fn the_plan_explores_each_release_once_oldest_first_for_what_it_finds_and_misses() {
        let list = small();
        let p = plan(&list, &[]).unwrap();
        let by: Vec<(&str, &[usize], &[usize])> = p
            .iter()
            .map(|e| (e.release.as_str(), &e.find[..], &e.clean[..]))
            .collect();
        assert_eq!(
            by,
            [
                ("v1.5.5", &[1][..], &[][..]),
                ("v1.7.0", &[0][..], &[1][..]),
                ("v1.8.0", &[][..], &[0][..]),
                ("v1.9.1", &[2][..], &[][..]),
            ]
        );
        let only = plan(&list, &["v1.7.0".into()]).unwrap();
        assert_eq!(only.len(), 1);
        let e = plan(&list, &["v1.6.0".into()]).unwrap_err().to_string();
        assert!(
            e.contains("v1.6.0") && e.contains("v1.5.5, v1.7.0, v1.8.0, v1.9.1"),
            "{e}"
        );
    }

    #[test]
    fn the_dry_run_prints_each_exploration_s_command_and_its_bugs() {
        let list = small();
        let mut r = request(&["v1.7.0", "v1.8.0"]);
        r.explore_args = vec!["--kinds".into(), "CloneSet".into()];
        let p = plan(&list, &r.releases).unwrap();
        let text = render_plan(&list, &p, &r, Path::new("reports/x"));
        assert_eq!(
            text,
            "harness bench rediscovery --budget 30m --seed 7 --releases 'v1.7.0,v1.8.0' -- --kinds CloneSet\n\
             list: suites/rediscovery.yaml (built in); 2 of its 3 bugs, 2 exploration(s) of 30m each (1h of exploring, bring-up aside); report: reports/x\n\
             \n\
             v1.7.0: harness explore --controller openkruise@v1.7.0 --budget 30m --seed 7 --report-dir reports/x/v1.7.0 --kinds CloneSet\n  \
               find (1):\n    \
                 a: O4 CloneSet `admits * spec.x`\n  \
               fixed here, must not show (1):\n    \
                 b (bad on v1.5.5)\n\
             \n\
             v1.8.0: harness explore --controller openkruise@v1.8.0 --budget 30m --seed 7 --report-dir reports/x/v1.8.0 --kinds CloneSet\n  \
               find: none\n  \
               fixed here, must not show (1):\n    \
                 a (bad on v1.7.0)\n"
        );
    }

    #[test]
    fn the_dry_run_of_the_checked_in_list_plans_every_release_it_names() {
        let list = List::builtin();
        let p = plan(&list, &[]).unwrap();
        let releases: Vec<&str> = p.iter().map(|e| e.release.as_str()).collect();
        assert_eq!(
            releases,
            [
                "v1.5.5", "v1.6.0", "v1.7.0", "v1.8.0", "v1.8.3", "v1.9.0", "v1.9.1"
            ]
        );
        let text = render_plan(&list, &p, &request(&[]), Path::new("out"));
        assert!(text.contains(&format!(
            "{} of its {} bugs, 7 exploration(s) of 30m each (210m of exploring",
            list.bugs.len(),
            list.bugs.len()
        )));
        assert!(text.contains(
            "v1.7.0: harness explore --controller openkruise@v1.7.0 --budget 30m --seed 7 --report-dir out/v1.7.0\n"
        ));
    }

    #[test]
    fn durations_read_as_the_cli_takes_them() {
        assert_eq!(duration(Duration::from_secs(1800)), "30m");
        assert_eq!(duration(Duration::from_secs(7200)), "2h");
        assert_eq!(duration(Duration::from_secs(90)), "90s");
        assert_eq!(duration(Duration::ZERO), "0s");
    }
}
