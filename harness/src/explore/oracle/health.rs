//! O6: whose trial a controller's panic, or the exit it caused, is when trials run
//! side by side; what a denial it logged denied.

/// Whether the panics a controller logged while a trial ran (`panics`, each with the first
/// lines of its stack) are that trial's, whose objects are of `kinds`.
///
/// A controller's panic is logged once, whatever trial made it, and every trial running
/// beside it sees it in its window. A panic whose stack runs through the package of the
/// controller of a kind the exploration makes (`pkg/controller/<that kind in lower case>/`,
/// `explored`) is charged only to the trials of that kind; one whose stack names no such
/// package (a shared package, a controller of every pod, a recovered panic's runtime frames)
/// is every trial's. Within the trials of that kind, a stack that runs through a method of a
/// type named after a kind the exploration makes and `Adapter` (`(*CloneSetAdapter)`: what
/// a controller of several kinds of object uses for one of them) is charged only to the
/// trials whose objects include that kind. The trial's when any of its panics is.
pub fn panics_are_theirs(panics: &[String], kinds: &[&str], explored: &[&str]) -> bool {
    static DIR: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"/pkg/controller/([a-z0-9]+)[/.]").expect("a valid regex")
    });
    static ADAPTER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\(\*([A-Za-z0-9]+)Adapter\)").expect("a valid regex")
    });
    let lower = |k: &&str| k.to_ascii_lowercase();
    let explored: Vec<String> = explored.iter().map(lower).collect();
    let kinds: Vec<String> = kinds.iter().map(lower).collect();
    // The names `re` captures in `p` that are kinds the exploration makes, in lower case.
    let named = |re: &regex::Regex, p: &str| -> Vec<String> {
        re.captures_iter(p)
            .filter_map(|c| c.get(1).map(|m| m.as_str().to_ascii_lowercase()))
            .filter(|d| explored.contains(d))
            .collect()
    };
    let any_theirs = |names: &[String]| names.iter().any(|d| kinds.contains(d));
    panics.is_empty()
        || panics.iter().any(|p| {
            let owners = named(&DIR, p);
            let adapters = named(&ADAPTER, p);
            owners.is_empty()
                || (any_theirs(&owners) && (adapters.is_empty() || any_theirs(&adapters)))
        })
}

/// Whether a controller's exit or restart while a trial ran is that trial's, given the panics
/// logged in its window (`panics`, as for [`panics_are_theirs`]).
///
/// An unrecovered panic (`panic: ` and a goroutine's stack) ends the process, and the exit is
/// the panic's: it is charged as that panic is. An exit with no unrecovered panic in the window
/// (a lost lease, a failed check, a kill) names no controller, and is every trial's beside it.
pub fn exit_is_theirs(panics: &[String], kinds: &[&str], explored: &[&str]) -> bool {
    let fatal: Vec<String> = panics
        .iter()
        .filter(|p| p.starts_with("panic: "))
        .cloned()
        .collect();
    panics_are_theirs(&fatal, kinds, explored)
}

/// What the controller was denied, read from a denial it logged (`text`, its log line or a
/// summary holding it, quotes escaped or not): `get daemonsets.apps`, `list pods` (the core
/// group named by nothing), the first denial's; none when `text` holds none in the apiserver's
/// words.
pub fn denied_request(text: &str) -> Option<String> {
    static DENIED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"cannot ([a-z]+) resource \\*"([a-z0-9./-]+)\\*" in API group \\*"([a-z0-9.-]*)\\*""#,
        )
        .expect("a valid regex")
    });
    let c = DENIED.captures(text)?;
    let (verb, resource, group) = (&c[1], &c[2], &c[3]);
    Some(match group {
        "" => format!("{verb} {resource}"),
        g => format!("{verb} {resource}.{g}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_is_read_as_the_request_denied_in_any_quoting() {
        let plain = r#"daemonsets.apps "x" is forbidden: User "system:serviceaccount:k:m" cannot get resource "daemonsets" in API group "apps" in the namespace "n""#;
        assert_eq!(
            denied_request(plain).as_deref(),
            Some("get daemonsets.apps")
        );
        // As a JSON log line quotes it, and as a finding's summary quotes that again.
        let once = plain.replace('"', "\\\"");
        assert_eq!(
            denied_request(&once).as_deref(),
            Some("get daemonsets.apps")
        );
        let twice = once.replace('\\', "\\\\");
        assert_eq!(
            denied_request(&twice).as_deref(),
            Some("get daemonsets.apps")
        );
        let core = r#"cannot list resource "pods" in API group "" at the cluster scope"#;
        assert_eq!(denied_request(core).as_deref(), Some("list pods"));
        assert_eq!(
            denied_request(
                r#"cannot update resource "leases/status" in API group "coordination.k8s.io""#
            )
            .as_deref(),
            Some("update leases/status.coordination.k8s.io")
        );
        assert_eq!(denied_request("the manager exited with status 2"), None);
    }

    const EXPLORED: &[&str] = &[
        "CloneSet",
        "UnitedDeployment",
        "PersistentPodState",
        "StatefulSet",
    ];

    fn stack(dir: &str) -> String {
        format!(
            "panic: assignment to entry in nil map\n\ngoroutine 37943 [running]:\n\
             example.com/ctl/pkg/controller/{dir}/adapter.(*Adapter).Apply(0x1)\n\
             \texample.com/ctl/pkg/controller/{dir}/adapter/adapter.go:123 +0x808"
        )
    }

    #[test]
    fn a_panic_in_another_explored_kinds_controller_is_not_the_trials() {
        let other = vec![stack("uniteddeployment")];
        assert!(!panics_are_theirs(
            &other,
            &["PersistentPodState", "StatefulSet"],
            EXPLORED
        ));
        // The kind's own trials, or a trial whose objects include it (a policy over it).
        assert!(panics_are_theirs(
            &other,
            &["UnitedDeployment", "CloneSet"],
            EXPLORED
        ));
        assert!(panics_are_theirs(
            &other,
            &["SidecarSet", "UnitedDeployment"],
            EXPLORED
        ));
        // A package no explored kind is named after (shared, or every pod's): every trial's.
        for dir in ["util", "podreadiness"] {
            assert!(
                panics_are_theirs(&[stack(dir)], &["CloneSet"], EXPLORED),
                "{dir}"
            );
        }
        // A recovered panic's first lines are the runtime's: every trial's.
        let recovered = "Observed a panic: runtime error\ngoroutine 1 [running]:\n\
                         k8s.io/apimachinery/pkg/util/runtime.logPanic(...)"
            .to_string();
        assert!(panics_are_theirs(&[recovered], &["CloneSet"], EXPLORED));
        // Any panic of the trial's among others makes them its.
        let both = vec![stack("uniteddeployment"), stack("cloneset")];
        assert!(panics_are_theirs(&both, &["CloneSet"], EXPLORED));
        // No panic seen (an exit, a denial): the finding stands as it is.
        assert!(panics_are_theirs(&[], &["CloneSet"], EXPLORED));
    }

    #[test]
    fn a_panic_in_a_kinds_adapter_is_the_trials_whose_objects_include_that_kind() {
        let adapter = |ty: &str| {
            format!(
                "panic: assignment to entry in nil map\n\ngoroutine 5 [running]:\n\
                 example.com/ctl/pkg/controller/uniteddeployment/adapter.(*{ty}Adapter).Apply(0x1)\n\
                 \texample.com/ctl/pkg/controller/uniteddeployment/adapter/a.go:144 +0x808\n\
                 example.com/ctl/pkg/controller/uniteddeployment.(*Reconcile).sync(0x2)"
            )
        };
        let stateful = vec![adapter("StatefulSet")];
        // The union's trial that makes StatefulSets: its.
        assert!(panics_are_theirs(
            &stateful,
            &["UnitedDeployment", "StatefulSet"],
            EXPLORED
        ));
        // The union's trials that make only CloneSets (a policy over one among them): not.
        assert!(!panics_are_theirs(
            &stateful,
            &["UnitedDeployment", "CloneSet"],
            EXPLORED
        ));
        assert!(!exit_is_theirs(
            &stateful,
            &["PodUnavailableBudget", "UnitedDeployment", "CloneSet"],
            EXPLORED
        ));
        // An adapter named after no kind the exploration makes narrows nothing.
        assert!(panics_are_theirs(
            &[adapter("Generic")],
            &["UnitedDeployment", "CloneSet"],
            EXPLORED
        ));
        // Another kind's controller stays another's, adapter or not.
        assert!(!panics_are_theirs(&stateful, &["CloneSet"], EXPLORED));
    }

    #[test]
    fn an_exit_is_charged_as_the_unrecovered_panic_that_ended_the_process() {
        let kinds = &["PersistentPodState", "StatefulSet"];
        // Another explored kind's controller panicked and the process ended: not this trial's.
        assert!(!exit_is_theirs(
            &[stack("uniteddeployment")],
            kinds,
            EXPLORED
        ));
        // The trial's own kind's: its.
        assert!(exit_is_theirs(
            &[stack("uniteddeployment")],
            &["UnitedDeployment"],
            EXPLORED
        ));
        // No unrecovered panic (a recovered one does not end the process): every trial's.
        let recovered = "Observed a panic: runtime error\ngoroutine 1 [running]:\n\
                         example.com/ctl/pkg/controller/uniteddeployment/x.go:1"
            .to_string();
        assert!(exit_is_theirs(&[recovered], kinds, EXPLORED));
        assert!(exit_is_theirs(&[], kinds, EXPLORED));
    }
}
