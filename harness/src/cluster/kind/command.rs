//! The commands the kind provider runs: start with [`CommandLine`], run by a [`CommandRunner`]
//! ([`ProcessRunner`] for real, a fake in tests); a cluster's are its [`KindPlan`].

use std::path::{Path, PathBuf};

/// One command: program and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it (`DOCKER_HOST` of a private daemon).
    pub env: Vec<(String, String)>,
}

impl std::fmt::Display for CommandLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (k, v) in &self.env {
            write!(f, "{k}={v} ")?;
        }
        write!(f, "{}", self.program.display())?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

/// What a finished command left.
#[derive(Debug, Clone, Default)]
pub struct CommandOutput {
    /// Exit status 0.
    pub success: bool,
    /// Its standard output (kept out of the run's progress: `kind export logs` and
    /// `docker load` print there).
    pub stdout: String,
    /// Its standard error (kind reports there).
    pub stderr: String,
}

/// Runs commands; the real one starts processes, tests use a fake.
pub trait CommandRunner: Send + Sync {
    /// Runs `cmd` to completion.
    fn run(&self, cmd: &CommandLine) -> std::io::Result<CommandOutput>;
}

/// Runs commands as child processes, their output captured.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessRunner;

impl CommandRunner for ProcessRunner {
    fn run(&self, cmd: &CommandLine) -> std::io::Result<CommandOutput> {
        let out = std::process::Command::new(&cmd.program)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .output()?;
        Ok(CommandOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// The commands for one cluster, in the order the provider runs them on success.
#[derive(Debug, Clone)]
pub struct KindPlan {
    /// The config file's contents.
    pub config: String,
    /// `kind create cluster ...`
    pub create: CommandLine,
    /// `kind export logs ...`
    pub export_logs: CommandLine,
    /// `kind delete cluster ...`
    pub delete: CommandLine,
}

impl CommandLine {
    pub(super) fn kind(kind: &Path, args: &[&str]) -> Self {
        Self {
            program: kind.to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![],
        }
    }

    /// The same command with `env` set.
    pub fn with_env(mut self, env: &[(String, String)]) -> Self {
        self.env.extend(env.iter().cloned());
        self
    }
}

/// `kind export logs` and `kind delete cluster` for cluster `name` in `dir`.
pub(super) fn teardown_commands(
    kind: &Path,
    name: &str,
    dir: &Path,
    logs: &Path,
) -> (CommandLine, CommandLine) {
    let kubeconfig = dir.join("kubeconfig").display().to_string();
    (
        CommandLine::kind(
            kind,
            &[
                "export",
                "logs",
                &logs.join(name).display().to_string(),
                "--name",
                name,
            ],
        ),
        CommandLine::kind(
            kind,
            &[
                "delete",
                "cluster",
                "--name",
                name,
                "--kubeconfig",
                &kubeconfig,
            ],
        ),
    )
}

impl std::fmt::Display for KindPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "# kind-config.yaml")?;
        write!(f, "{}", self.config)?;
        writeln!(
            f,
            "# commands (export logs and delete also run after a failed create)"
        )?;
        writeln!(f, "{}", self.create)?;
        writeln!(f, "{}", self.export_logs)?;
        writeln!(f, "{}", self.delete)
    }
}

/// `s` without the frames of Go stack traces (a function line, then its tab-indented file
/// line), which would fill a tail with no cause in it.
pub(super) fn without_stacks(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let frame = |i: usize| {
        let l = lines[i];
        l.starts_with('\t')
            || (!l.contains(' ') && lines.get(i + 1).is_some_and(|next| next.starts_with('\t')))
    };
    (0..lines.len())
        .filter(|&i| !frame(i))
        .map(|i| lines[i])
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_tail_leaves_out_go_stack_frames() {
        let out = "I0 starting\nerror execution phase kubelet-start: timed out\n\
                   k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/workflow.(*Runner).Run\n\
                   \tk8s.io/kubernetes@v1.32.5/cmd/kubeadm/app/cmd/phases/workflow/runner.go:234\n\
                   main.main\n\tk8s.io/kubernetes@v1.32.5/cmd/kubeadm/kubeadm.go:25\n";
        assert_eq!(
            without_stacks(out),
            "I0 starting\nerror execution phase kubelet-start: timed out"
        );
    }
}
