//! What a component's log says: start with [`Window`], the part of its life a check reads (a
//! scenario's time and namespace); [`forbidden_lines`] and [`panics`] find RBAC denials and
//! panics in it, and [`panic_in`] a recovered panic naming a scenario's namespace, as it is
//! logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ControllerError;

/// The complete lines a log file gains, read from where the last read ended.
pub(super) struct LogTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl LogTail {
    /// From the file's end now.
    pub(super) fn at_end(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: std::fs::metadata(path).map_or(0, |m| m.len()),
            partial: vec![],
        }
    }

    /// The lines completed since the last call (a line still being written waits).
    pub(super) fn next_lines(&mut self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return String::new();
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return String::new();
        }
        let mut new = vec![];
        let Ok(n) = f.read_to_end(&mut new) else {
            return String::new();
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&new);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return String::new();
        };
        let lines: Vec<u8> = self.partial.drain(..=end).collect();
        String::from_utf8_lossy(&lines).into_owned()
    }
}

/// The first recovered panic (`Observed a panic`) of `lines` that names `namespace`, as a
/// step's error: the line, up to 1,000 characters. A panic naming another namespace is
/// another scenario's; one naming none (an unrecovered `panic:`) is left to the invariants.
pub fn panic_in(lines: &str, namespace: &str) -> Option<String> {
    lines
        .lines()
        .find(|l| {
            l.contains("Observed a panic") && named_namespace(l).as_deref() == Some(namespace)
        })
        .map(|l| {
            format!(
                "the controller panicked in this scenario's namespace: {}",
                l.chars().take(1000).collect::<String>()
            )
        })
}

/// The part of a component's life a check looks at: all of it ([`Window::all`]), or a
/// scenario's time and namespace ([`Window::opening`]).
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Where local log files stood when the window opened (bytes; absent: from the start).
    offsets: BTreeMap<PathBuf, u64>,
    /// When it opened (for logs read from the cluster; None: the whole log).
    opened: Option<std::time::Instant>,
    /// A log line naming another namespace than this one belongs to another scenario.
    namespace: Option<String>,
}

impl Window {
    /// The whole life of a component.
    pub fn all() -> Self {
        Self::default()
    }

    /// A window opening now: the log files as long as they are, lines naming a namespace
    /// other than `namespace` left out.
    pub fn opening(logs: &[&Path], namespace: Option<&str>) -> Self {
        Self {
            offsets: logs
                .iter()
                .map(|l| (l.to_path_buf(), std::fs::metadata(l).map_or(0, |m| m.len())))
                .collect(),
            opened: Some(std::time::Instant::now()),
            namespace: namespace.map(String::from),
        }
    }

    /// The part of log file `path` inside the window.
    /// What came before the window is not read (a long exploration reads its log at every trial).
    pub fn read(&self, path: &Path) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(path) else {
            return String::new();
        };
        let len = f.metadata().map_or(0, |m| m.len());
        let start = self.offsets.get(path).map_or(0, |o| (*o).min(len));
        let mut bytes = vec![];
        if f.seek(SeekFrom::Start(start)).is_ok() {
            let _ = f.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// How many seconds back a log read from the cluster should reach.
    pub(super) fn since_seconds(&self) -> Option<i64> {
        self.opened.map(|t| t.elapsed().as_secs() as i64 + 1)
    }

    /// Whether a log line belongs to the window's namespace (a line naming no namespace does).
    pub fn keeps(&self, line: &str) -> bool {
        let (Some(ns), Some(named)) = (&self.namespace, named_namespace(line)) else {
            return true;
        };
        *ns == named
    }
}

/// The namespace an API error in a log line names (`... in the namespace "x"`, quotes possibly
/// escaped).
fn named_namespace(line: &str) -> Option<String> {
    // An API error's words, then controller-runtime's structured key and klog's key=value.
    let start = ["in the namespace ", "\"namespace\"=", " namespace="]
        .iter()
        .find_map(|key| line.find(key).map(|at| at + key.len()))?;
    let rest = line[start..].trim_start_matches(['\\', '"']);
    let end = rest.find(['\\', '"', ' ']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// The denials and panics a manager's log shows, the first as the error.
pub(super) fn log_findings(
    name: &str,
    version: &str,
    log: &str,
    window: &Window,
) -> Result<(), ControllerError> {
    let denials = forbidden_lines(log, window);
    if let Some(first) = denials.first() {
        return Err(ControllerError::ManagerForbidden {
            name: name.into(),
            version: version.into(),
            count: denials.len(),
            first: first.clone(),
        });
    }
    let panics = panics_within(log, window);
    if let Some(first) = panics.first() {
        return Err(ControllerError::ManagerPanicked {
            name: name.into(),
            version: version.into(),
            count: panics.len(),
            first: first.clone(),
        });
    }
    Ok(())
}

/// The panics of `log` ([`panics`]) that `window` keeps: a check reports denials before
/// panics, so whoever excuses the denials asks for these.
pub fn panics_within(log: &str, window: &Window) -> Vec<String> {
    panics(log)
        .into_iter()
        .filter(|p| window.keeps(p.lines().next().unwrap_or_default()))
        .collect()
}

/// Panics in a Go program's log: controller-runtime's and apimachinery's "Observed a panic"
/// (recovered), and an unrecovered `panic:` followed by a `goroutine N [...]` stack; each with
/// up to 8 lines after it.
pub fn panics(log: &str) -> Vec<String> {
    excerpts(log, false)
}

/// The panics of `log` that `window` keeps, as [`panics_within`], an unrecovered one with the
/// whole stack of the goroutine that panicked (to the blank line that ends it, at most
/// [`STACK_LINES`]): whose code panicked, which its first lines may not say (a shared
/// library's frames come first, the controller that called it below them).
pub fn panic_stacks_within(log: &str, window: &Window) -> Vec<String> {
    excerpts(log, true)
        .into_iter()
        .filter(|p| window.keeps(p.lines().next().unwrap_or_default()))
        .collect()
}

/// The most lines of a panicking goroutine's stack [`panic_stacks_within`] keeps.
pub const STACK_LINES: usize = 200;

/// Panics in `log`, each with up to 8 lines after it, or, `whole` and unrecovered, with its
/// goroutine's stack.
fn excerpts(log: &str, whole: bool) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let goroutine = |l: &str| l.starts_with("goroutine ") && l.trim_end().ends_with("]:");
    lines
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            l.contains("Observed a panic")
                || (l.starts_with("panic: ") && lines[*i..].iter().take(40).any(|l| goroutine(l)))
        })
        .map(|(i, l)| {
            let end = match whole && l.starts_with("panic: ") {
                // The stack ends at the first blank line after its `goroutine` line.
                true => {
                    let stack = i + lines[i..].iter().position(|l| goroutine(l)).unwrap_or(0);
                    let blank = lines[stack..]
                        .iter()
                        .position(|l| l.trim().is_empty())
                        .map_or(lines.len(), |b| stack + b);
                    blank.min(stack + STACK_LINES)
                }
                false => i + 9,
            };
            lines[i..end.min(lines.len())]
                .iter()
                .map(|l| l.chars().take(300).collect::<String>())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// Log lines where the API server refused the manager's ServiceAccount, of `window`'s
/// namespace.
pub fn forbidden_lines(log: &str, window: &Window) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("forbidden") && l.contains("system:serviceaccount:"))
        .filter(|l| window.keeps(l))
        .map(|l| l.chars().take(400).collect())
        .collect()
}

/// A request the apiserver refused a ServiceAccount, as a denial's log line names it (the
/// apiserver's own wording: `User "…" cannot VERB resource "RES[/SUB]" in API group "G" in the
/// namespace "NS"`, or `at the cluster scope`), so that it can be asked again
/// ([`Denial::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Denial {
    /// The ServiceAccount's user name (`system:serviceaccount:NS:NAME`).
    pub user: String,
    /// The request's verb.
    pub verb: String,
    /// The resource.
    pub resource: String,
    /// Its subresource, if any.
    pub subresource: Option<String>,
    /// The API group (`""`: core).
    pub group: String,
    /// The namespace; `None` at the cluster scope.
    pub namespace: Option<String>,
}

impl Denial {
    /// The denial a log line shows (its quotes escaped or not), if it names a resource.
    pub fn parse(line: &str) -> Option<Self> {
        let text = line.replace('\\', "");
        let quoted = |after: &str, from: &str| -> Option<(String, usize)> {
            let at = from.find(after)? + after.len();
            let rest = from[at..].strip_prefix('"')?;
            let end = rest.find('"')?;
            Some((rest[..end].to_string(), at + 1 + end + 1))
        };
        let (user, at) = quoted("User ", &text)?;
        let rest = text[at..].strip_prefix(" cannot ")?;
        let (verb, rest) = rest.split_once(' ')?;
        let (resource, at) = quoted("resource ", rest)?;
        let rest = &rest[at..];
        let (group, at) = quoted(" in API group ", rest)?;
        let rest = &rest[at..];
        let namespace = match quoted(" in the namespace ", rest) {
            Some((ns, _)) => Some(ns),
            None if rest.starts_with(" at the cluster scope") => None,
            None => return None,
        };
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, sub)) => (r.to_string(), Some(sub.to_string())),
            None => (resource, None),
        };
        Some(Self {
            user,
            verb: verb.to_string(),
            resource,
            subresource,
            group,
            namespace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_keeps_its_own_namespace_and_its_own_time() {
        let line = |ns: &str| {
            format!(
                "E1123 x.go:1] \"Failed\" err=\"daemonsets.apps \\\"a\\\" is forbidden: User \\\"system:serviceaccount:kruise-system:m\\\" cannot get resource \\\"daemonsets\\\" in API group \\\"apps\\\" in the namespace \\\"{ns}\\\"\""
            )
        };
        assert_eq!(named_namespace(&line("h-one")).as_deref(), Some("h-one"));
        assert_eq!(
            named_namespace("is forbidden ... in the namespace \"plain\"").as_deref(),
            Some("plain")
        );
        let structured = "E1126 x.go:434] \"msg\"=\"Observed a panic\" \"controller\"=\"c\" \"name\"=\"x\" \"namespace\"=\"h-two\" \"panic\"=\"p\"";
        assert_eq!(named_namespace(structured).as_deref(), Some("h-two"));
        assert_eq!(
            named_namespace("I1126 x.go:1] \"Sync\" namespace=\"h-three\" name=\"x\"").as_deref(),
            Some("h-three")
        );
        let w = Window {
            namespace: Some("h-one".into()),
            ..Window::all()
        };
        assert!(
            log_findings("m", "v", structured, &w).is_ok(),
            "another namespace's panic is not this window's"
        );
        assert!(log_findings("m", "v", structured, &Window::all()).is_err());
        let cluster = "E1123 forbidden: User \"system:serviceaccount:k:m\" cannot list resource \"nodes\" at the cluster scope";
        assert_eq!(named_namespace(cluster), None);
        let log = format!("{}\n{}\n{cluster}\n", line("h-one"), line("h-two"));
        let w = Window {
            namespace: Some("h-one".into()),
            ..Window::all()
        };
        let kept = forbidden_lines(&log, &w);
        assert_eq!(
            kept.len(),
            2,
            "its own namespace and the cluster scope: {kept:?}"
        );
        assert!(kept[0].contains("h-one") && kept[1].contains("cluster scope"));
        assert_eq!(forbidden_lines(&log, &Window::all()).len(), 3);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.log");
        std::fs::write(&file, format!("{}\n", line("h-one"))).unwrap();
        let w = Window::opening(&[file.as_path()], Some("h-one"));
        assert!(
            forbidden_lines(&w.read(&file), &w).is_empty(),
            "written before it opened"
        );
        std::fs::write(&file, format!("{}\n{}\n", line("h-one"), line("h-one"))).unwrap();
        assert_eq!(forbidden_lines(&w.read(&file), &w).len(), 1);
    }

    #[test]
    fn a_tripwire_trips_on_a_panic_naming_its_namespace_logged_after_it_was_set() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("manager.log");
        let panic = |ns: &str| {
            format!(
                "E1127 1 controller.go:1] \"Observed a panic\" controller=\"c\" namespace=\"{ns}\" panic=\"runtime error: index out of range\"\n"
            )
        };
        // Before the scenario: not its business.
        std::fs::write(&log, panic("h-one")).unwrap();
        let mut tail = LogTail::at_end(&log);
        assert_eq!(tail.next_lines(), "");
        let append = |text: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        append(&panic("h-two"));
        append("I1127 reconcile, no newline yet");
        let lines = tail.next_lines();
        assert!(panic_in(&lines, "h-one").is_none(), "another namespace's");
        let tripped = panic_in(&lines, "h-two").unwrap();
        assert!(tripped.contains("index out of range"), "{tripped}");
        // The unfinished line waits for its end.
        append(" ... done\n");
        assert_eq!(
            tail.next_lines(),
            "I1127 reconcile, no newline yet ... done\n"
        );
    }

    #[test]
    fn panics_are_found_recovered_or_not_and_quiet_logs_pass() {
        let recovered = "I1122 reconcile\nE1122 12:00:00 runtime.go:79] Observed a panic: \"invalid memory address\" (runtime error)\ngoroutine 412 [running]:\nk8s.io/apimachinery/pkg/util/runtime.logPanic(...)\n";
        let found = panics(recovered);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("Observed a panic") && found[0].contains("goroutine 412"));
        let fatal = "I1122 started\npanic: assignment to entry in nil map\n\ngoroutine 1 [running]:\nmain.main()\n";
        assert_eq!(panics(fatal).len(), 1);
        let err = log_findings("kruise-manager", "v1.9.0", fatal, &Window::all()).unwrap_err();
        assert!(
            err.to_string()
                .contains("kruise-manager v1.9.0 panicked (1 times)"),
            "{err}"
        );
        let quiet =
            "I1122 reconcile CloneSet\nI1122 panic: mentioned in a message without a stack\n";
        assert!(panics(quiet).is_empty());
        assert!(log_findings("kruise-manager", "v1.9.0", quiet, &Window::all()).is_ok());
        // A denial is reported before a panic; the panic is still there to be asked for.
        let denied = "E1122 forbidden: User \"system:serviceaccount:k:m\" cannot list resource \"nodes\" in API group \"\" at the cluster scope\n";
        let both = format!("{denied}{recovered}");
        let err = log_findings("m", "v", &both, &Window::all()).unwrap_err();
        assert!(err.to_string().contains("denied"), "{err}");
        let within = panics_within(&both, &Window::all());
        assert_eq!(within.len(), 1, "{within:?}");
        assert!(within[0].contains("Observed a panic"));
        assert!(panics_within(denied, &Window::all()).is_empty());
    }

    #[test]
    fn an_unrecovered_panics_stack_is_read_to_its_end_for_whose_code_it_was() {
        let mut stack = vec![
            "panic: runtime error: invalid memory address [recovered, repanicked]".to_string(),
            String::new(),
            "goroutine 7 [running]:".into(),
        ];
        for f in 0..6 {
            stack.push(format!("example.com/lib/pkg/shared.f{f}(0x0)"));
            stack.push(format!("\texample.com/lib/pkg/shared/f.go:{f} +0x38"));
        }
        stack.push("example.com/ctl/pkg/controller/thing.(*Control).sync(0x1)".into());
        stack.push("\texample.com/ctl/pkg/controller/thing/sync.go:234 +0x3b4".into());
        let log = format!(
            "I1203 start\n{}\n\ngoroutine 8 [select]:\nexample.com/ctl/pkg/controller/other.wait()\n",
            stack.join("\n")
        );
        // The first lines show the shared library's frames only.
        let first = panics(&log);
        assert_eq!(first.len(), 1);
        assert!(!first[0].contains("pkg/controller/thing"), "{}", first[0]);
        // The whole stack shows the controller, and ends with its goroutine.
        let whole = panic_stacks_within(&log, &Window::all());
        assert_eq!(whole.len(), 1);
        assert!(
            whole[0].contains("pkg/controller/thing/sync.go"),
            "{}",
            whole[0]
        );
        assert!(!whole[0].contains("pkg/controller/other"), "{}", whole[0]);
        // A recovered panic is read as before.
        let recovered =
            "E1122 Observed a panic: x\ngoroutine 412 [running]:\nk8s.io/x.logPanic()\n";
        assert_eq!(
            panic_stacks_within(recovered, &Window::all()),
            panics(recovered)
        );
    }

    #[test]
    fn a_denial_is_read_back_from_its_log_line_escaped_or_not() {
        let escaped = "E1202 11:49:39.433935 16234 cloneset_controller.go:212] \"Failed syncing CloneSet\" err=\"pods \\\"x-7thf9\\\" is forbidden: User \\\"system:serviceaccount:kruise-system:kruise-manager\\\" cannot delete resource \\\"pods\\\" in API group \\\"\\\" in the namespace \\\"x-cloneset-0-c877\\\"\" cloneSet=\"x-cloneset-0-c877/x\"";
        assert_eq!(
            Denial::parse(escaped),
            Some(Denial {
                user: "system:serviceaccount:kruise-system:kruise-manager".into(),
                verb: "delete".into(),
                resource: "pods".into(),
                subresource: None,
                group: String::new(),
                namespace: Some("x-cloneset-0-c877".into()),
            })
        );
        let cluster = "E1123 forbidden: User \"system:serviceaccount:k:m\" cannot update resource \"nodes/status\" in API group \"\" at the cluster scope";
        let d = Denial::parse(cluster).unwrap();
        assert_eq!(
            (
                d.verb.as_str(),
                d.resource.as_str(),
                d.subresource.as_deref()
            ),
            ("update", "nodes", Some("status"))
        );
        assert_eq!(d.namespace, None);
        assert_eq!(
            Denial::parse("E1123 forbidden: User \"u\" cannot get path \"/metrics\""),
            None,
            "a path is no resource"
        );
        assert_eq!(Denial::parse("I1123 reconcile CloneSet"), None);
    }
}
