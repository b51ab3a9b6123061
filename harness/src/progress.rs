//! Progress output for long work (builds, cluster bring-up): [`Progress`] draws spinners on a
//! terminal and prints plain, rate-limited lines elsewhere (CI logs).

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Terminal,
    Plain,
    Silent,
}

/// Where progress goes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Progress {
    mode: Mode,
}

impl Progress {
    /// Spinners when stderr is a terminal, plain lines otherwise.
    pub fn stderr() -> Self {
        let mode = if std::io::stderr().is_terminal() {
            Mode::Terminal
        } else {
            Mode::Plain
        };
        Self { mode }
    }

    /// Plain lines on stderr (good for test logs).
    pub fn plain() -> Self {
        Self { mode: Mode::Plain }
    }

    /// Nothing at all.
    pub fn silent() -> Self {
        Self { mode: Mode::Silent }
    }

    /// Prints one line.
    pub fn line(&self, msg: &str) {
        if self.mode != Mode::Silent {
            eprintln!("{msg}");
        }
    }

    /// Starts a task shown until finished.
    pub fn task(&self, title: &str) -> Task {
        let bar = match self.mode {
            Mode::Terminal => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {prefix} [{elapsed}] {wide_msg}")
                        .expect("valid template"),
                );
                bar.set_prefix(title.to_string());
                bar.enable_steady_tick(Duration::from_millis(120));
                Some(Arc::new(bar))
            }
            Mode::Plain => {
                eprintln!("{title} ...");
                None
            }
            Mode::Silent => None,
        };
        Task {
            bar,
            title: title.to_string(),
            mode: self.mode,
        }
    }
}

/// One running task of a [`Progress`].
#[derive(Debug)]
pub struct Task {
    bar: Option<Arc<ProgressBar>>,
    title: String,
    mode: Mode,
}

impl Task {
    /// Replaces the transient status (spinner only).
    pub fn set(&self, msg: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(msg.to_string());
        }
    }

    /// A status worth a line in a log (printed in plain mode).
    pub fn note(&self, msg: &str) {
        match self.mode {
            Mode::Plain => eprintln!("{}: {msg}", self.title),
            Mode::Terminal => self.set(msg),
            Mode::Silent => {}
        }
    }

    /// Ends the task with a final line.
    pub fn finish(self, msg: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.mode != Mode::Silent {
            eprintln!("{msg}");
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
