//! The OCI runtime a private Docker daemon runs containers with: runc, minus the capabilities
//! runc cannot grant here. Start with [`exec_runc`] (what `harness oci-runtime` calls).
//!
//! `docker run --privileged` and `docker exec --privileged` ask for every capability the
//! daemon knows. In a sandbox whose capability bounding set lacks one of them (this project's
//! CI lacks `CAP_SYS_RESOURCE`), runc then fails with "unable to apply caps: operation not
//! permitted". Before runc's `create`, `run` and `exec`, [`exec_runc`] removes from the
//! process's capability sets every capability outside its own bounding set (the same set runc
//! would run with), then execs runc with its arguments unchanged; every other runc command
//! goes straight to runc.
//!
//! How containerd's runc shim calls its runtime (go-runc; the daemon puts our
//! `oci-runtime --runc <runc> --` in front of these):
//!
//! ```text
//! <rt> --root R --log B/log.json --log-format json [--systemd-cgroup] create --bundle B --pid-file B/init.pid [--console-socket S] ID
//! <rt> --root R --log B/log.json --log-format json exec --process /tmp/runc-processN --detach --pid-file B/X.pid [--console-socket S] ID
//! <rt> --root R --log B/log.json --log-format json start|state|kill|delete|update|pause|resume|ps ... ID
//! ```

use std::convert::Infallible;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Errors of the runtime wrapper.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The process's own status could not be read.
    #[error("read the capability bounding set from /proc/self/status: {detail}")]
    Bounding {
        /// What went wrong.
        detail: String,
    },
    /// The runtime spec or process file could not be read or written.
    #[error("access {}", path.display())]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// runc could not be executed.
    #[error("exec {}", runc.display())]
    Exec {
        /// runc.
        runc: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// The capabilities by number, as the OCI runtime spec names them (Linux 6.x knows 0 to 40).
pub const CAPABILITIES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The capability sets of an OCI process.
const SETS: [&str; 5] = [
    "bounding",
    "effective",
    "permitted",
    "inheritable",
    "ambient",
];

/// runc's global options that take a value (`--root R`); runc also accepts them with one dash.
const GLOBAL_VALUE_FLAGS: [&str; 5] = ["root", "log", "log-format", "criu", "rootless"];

/// What the wrapper does to a runc invocation before running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Nothing: runc as it is.
    None,
    /// `create` or `run`: the runtime spec (`<bundle>/config.json`), whose `process` holds the
    /// capabilities.
    Spec(PathBuf),
    /// `exec --process FILE`: an OCI process, capabilities at its top level.
    Process(PathBuf),
}

/// The name of a flag (`--bundle=x` and `-bundle` are `bundle`) and its inline value, or
/// `None` for a word that is not a flag.
fn flag(arg: &str) -> Option<(&str, Option<&str>)> {
    let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    if name.is_empty() {
        return None;
    }
    Some(match name.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (name, None),
    })
}

/// The runc subcommand of `args` and the arguments after it: global options (and the values
/// of those that take one) are skipped.
pub fn subcommand(args: &[OsString]) -> Option<(&str, &[OsString])> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_str()?;
        match flag(a) {
            Some((name, None)) if GLOBAL_VALUE_FLAGS.contains(&name) => i += 2,
            Some(_) => i += 1,
            None => return Some((a, &args[i + 1..])),
        }
    }
    None
}

/// The value of option `long` (or its short form `short`) among a subcommand's arguments.
fn option_value(args: &[OsString], long: &str, short: &str) -> Option<PathBuf> {
    let mut words = args.iter();
    while let Some(w) = words.next() {
        let Some(a) = w.to_str() else { continue };
        if a == "--" {
            return None;
        }
        match flag(a) {
            Some((n, Some(v))) if n == long || n == short => return Some(PathBuf::from(v)),
            Some((n, None)) if n == long || n == short => return words.next().map(PathBuf::from),
            _ => {}
        }
    }
    None
}

/// What to edit before runc runs with `args`; relative paths are runc's, from its working
/// directory.
pub fn edit_for(args: &[OsString]) -> Edit {
    match subcommand(args) {
        Some(("create" | "run", rest)) => {
            let bundle = option_value(rest, "bundle", "b").unwrap_or_else(|| PathBuf::from("."));
            Edit::Spec(bundle.join("config.json"))
        }
        Some(("exec", rest)) => match option_value(rest, "process", "p") {
            Some(p) => Edit::Process(p),
            None => Edit::None,
        },
        _ => Edit::None,
    }
}

/// The bounding set in the text of `/proc/<pid>/status` (its `CapBnd:` line).
pub fn bounding_set(status: &str) -> Option<u64> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))?
        .trim();
    u64::from_str_radix(hex, 16).ok()
}

/// Whether capability `name` is one this kernel numbers and `bounding` lacks.
fn ungrantable(name: &str, bounding: u64) -> bool {
    CAPABILITIES
        .iter()
        .position(|c| *c == name)
        .is_some_and(|bit| bounding & (1u64 << bit) == 0)
}

/// Removes from every capability set of `caps` (an OCI `capabilities` object) the
/// capabilities outside `bounding`; names it does not know are kept (runc judges them).
/// Whether anything was removed.
pub fn strip_capabilities(caps: &mut Value, bounding: u64) -> bool {
    let mut changed = false;
    for set in SETS {
        if let Some(list) = caps.get_mut(set).and_then(Value::as_array_mut) {
            let before = list.len();
            list.retain(|c| !c.as_str().is_some_and(|n| ungrantable(n, bounding)));
            changed |= list.len() != before;
        }
    }
    changed
}

/// Applies `edit` with `bounding`: rewrites the file in place (runc reads it next) when a
/// capability had to go. Whether it was rewritten; a file that is missing or not JSON is left
/// to runc, which says what is wrong with it.
pub fn apply(edit: &Edit, bounding: u64) -> Result<bool, RuntimeError> {
    let (path, in_process) = match edit {
        Edit::None => return Ok(false),
        Edit::Spec(p) => (p, true),
        Edit::Process(p) => (p, false),
    };
    let io = |source| RuntimeError::Io {
        path: path.clone(),
        source,
    };
    // A file that is missing or not JSON is runc's to report, in its own words.
    let text = match fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io(e)),
    };
    let Ok(mut doc) = serde_json::from_slice::<Value>(&text) else {
        return Ok(false);
    };
    let caps = if in_process {
        doc.get_mut("process")
            .and_then(|p| p.get_mut("capabilities"))
    } else {
        doc.get_mut("capabilities")
    };
    let Some(caps) = caps else { return Ok(false) };
    if !strip_capabilities(caps, bounding) {
        return Ok(false);
    }
    let body = serde_json::to_vec(&doc).expect("a JSON value serializes");
    fs::write(path, body).map_err(io)?;
    Ok(true)
}

/// Runs `runc` with `args` as the OCI runtime of a private Docker daemon: the process to
/// start loses the capabilities outside this process's bounding set, then runc replaces this
/// process (same pid, file descriptors and environment; std resets the signal mask and
/// `SIGPIPE`, so runc starts as the shim would have started it). Returns only on failure.
pub fn exec_runc(runc: &Path, args: &[OsString]) -> Result<Infallible, RuntimeError> {
    use std::os::unix::process::CommandExt;
    let edit = edit_for(args);
    if edit != Edit::None {
        let status =
            fs::read_to_string("/proc/self/status").map_err(|e| RuntimeError::Bounding {
                detail: e.to_string(),
            })?;
        let bounding = bounding_set(&status).ok_or_else(|| RuntimeError::Bounding {
            detail: "no CapBnd line".into(),
        })?;
        apply(&edit, bounding)?;
    }
    let source = std::process::Command::new(runc).args(args).exec();
    Err(RuntimeError::Exec {
        runc: runc.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    /// The bounding set of this project's CI: bits 0 to 40 but CAP_SYS_RESOURCE (24).
    const SANDBOX: u64 = 0x0000_01ff_feff_ffff;

    #[test]
    fn the_subcommand_comes_after_global_options_and_their_values() {
        let a = args(
            "--root /r/moby --log /b/log.json --log-format json --systemd-cgroup create --bundle /b x",
        );
        let (cmd, rest) = subcommand(&a).unwrap();
        assert_eq!(cmd, "create");
        assert_eq!(rest, &args("--bundle /b x")[..]);
        // `--x=y` and one-dash forms; the value of an option is never the subcommand.
        let a = args("--root=/r -log start --debug -rootless false delete id");
        assert_eq!(subcommand(&a).unwrap().0, "delete");
        assert_eq!(subcommand(&args("--criu create --version")), None);
        assert_eq!(subcommand(&args("--version")), None);
    }

    #[test]
    fn create_and_run_edit_the_bundle_s_spec_and_exec_its_process_file() {
        let shim = "--root /r/moby --log /b/log.json --log-format json";
        assert_eq!(
            edit_for(&args(&format!(
                "{shim} create --bundle /b --pid-file /b/init.pid --console-socket /s id"
            ))),
            Edit::Spec("/b/config.json".into())
        );
        assert_eq!(
            edit_for(&args(&format!("{shim} run -b=/c id"))),
            Edit::Spec("/c/config.json".into())
        );
        // No bundle: runc's working directory.
        assert_eq!(
            edit_for(&args("create id")),
            Edit::Spec("./config.json".into())
        );
        assert_eq!(
            edit_for(&args(&format!(
                "{shim} exec --process /tmp/runc-process1 --detach --pid-file /b/e.pid id"
            ))),
            Edit::Process("/tmp/runc-process1".into())
        );
        assert_eq!(
            edit_for(&args("exec -p=/tmp/p id")),
            Edit::Process("/tmp/p".into())
        );
        // exec without a process file builds the process from the spec runc already ran.
        assert_eq!(edit_for(&args("exec id sh")), Edit::None);
        for other in [
            "start id",
            "kill id 9",
            "delete --force id",
            "state id",
            "--version",
        ] {
            assert_eq!(
                edit_for(&args(&format!("{shim} {other}"))),
                Edit::None,
                "{other}"
            );
        }
    }

    #[test]
    fn the_bounding_set_is_read_from_the_status_text() {
        let status = "Name:\tharness\nCapPrm:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\n";
        assert_eq!(bounding_set(status), Some(SANDBOX));
        assert_eq!(bounding_set("Name:\tx\n"), None);
        assert_eq!(CAPABILITIES[24], "CAP_SYS_RESOURCE");
        assert_eq!(CAPABILITIES[40], "CAP_CHECKPOINT_RESTORE");
    }

    #[test]
    fn capabilities_outside_the_bounding_set_leave_every_set_and_nothing_else_changes() {
        let all: Vec<&str> = CAPABILITIES[..38].to_vec();
        let mut caps = json!({
            "bounding": all,
            "effective": all,
            "permitted": all,
            "inheritable": ["CAP_SYS_RESOURCE", "CAP_CHOWN"],
            "ambient": ["CAP_SYS_RESOURCE"],
        });
        assert!(strip_capabilities(&mut caps, SANDBOX));
        let kept: Vec<&str> = all
            .iter()
            .copied()
            .filter(|c| *c != "CAP_SYS_RESOURCE")
            .collect();
        assert_eq!(caps["bounding"], json!(kept));
        assert_eq!(caps["effective"], json!(kept));
        assert_eq!(caps["permitted"], json!(kept));
        assert_eq!(caps["inheritable"], json!(["CAP_CHOWN"]));
        assert_eq!(caps["ambient"], json!([]));
        // Nothing to remove: unchanged, and a name the table lacks is runc's to judge.
        let mut plain = json!({"bounding": ["CAP_CHOWN", "CAP_FUTURE"], "effective": []});
        let before = plain.clone();
        assert!(!strip_capabilities(&mut plain, SANDBOX));
        assert_eq!(plain, before);
    }

    #[test]
    fn the_files_are_rewritten_in_place_only_when_a_capability_goes() {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("config.json");
        let doc = json!({
            "ociVersion": "1.0.2",
            "process": {
                "args": ["sh", "-c", "echo CAP_SYS_RESOURCE"],
                "capabilities": {"bounding": ["CAP_SYS_ADMIN", "CAP_SYS_RESOURCE"]},
                "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 18446744073709551615u64, "soft": 1024}],
            },
            "linux": {"resources": {"memory": {"limit": -1}}},
        });
        fs::write(&spec, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
        assert!(apply(&Edit::Spec(spec.clone()), SANDBOX).unwrap());
        let after: Value = serde_json::from_slice(&fs::read(&spec).unwrap()).unwrap();
        let mut want = doc.clone();
        want["process"]["capabilities"]["bounding"] = json!(["CAP_SYS_ADMIN"]);
        assert_eq!(
            after, want,
            "only the capability went; the argument is untouched"
        );
        assert!(!apply(&Edit::Spec(spec.clone()), SANDBOX).unwrap());

        let process = dir.path().join("runc-process1");
        fs::write(
            &process,
            r#"{"args":["sh"],"capabilities":{"effective":["CAP_SYS_RESOURCE","CAP_KILL"]}}"#,
        )
        .unwrap();
        assert!(apply(&Edit::Process(process.clone()), SANDBOX).unwrap());
        let after: Value = serde_json::from_slice(&fs::read(&process).unwrap()).unwrap();
        assert_eq!(after["capabilities"]["effective"], json!(["CAP_KILL"]));
        // A process without capabilities is left alone, and so are a missing file and one
        // that is not JSON: runc reports those.
        fs::write(&process, r#"{"args":["sh"]}"#).unwrap();
        assert!(!apply(&Edit::Process(process.clone()), SANDBOX).unwrap());
        assert!(!apply(&Edit::Spec(dir.path().join("none.json")), SANDBOX).unwrap());
        fs::write(&process, "not json").unwrap();
        assert!(!apply(&Edit::Process(process.clone()), SANDBOX).unwrap());
        assert_eq!(fs::read_to_string(&process).unwrap(), "not json");
        // A file that cannot be read is an error naming it.
        let e = apply(&Edit::Spec(dir.path().to_path_buf()), SANDBOX).unwrap_err();
        assert!(
            e.to_string().contains(&dir.path().display().to_string()),
            "{e}"
        );
    }
}
