//! Where the Debian packages come from: the host's apt sources ([`host_sources`], one-line
//! and deb822 files), read when a build runs and turned into the `deb` lines mmdebstrap gets on
//! its command line ([`mirror_lines`]), so no mirror is written into a file.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// One `deb` entry of the host's apt sources: where a suite is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    /// The URI.
    pub uri: String,
    /// The suite (`bookworm`, `bookworm-security`).
    pub suite: String,
}

/// The `deb` entries of a one-line `sources.list`.
pub fn one_line_sources(text: &str) -> Vec<AptSource> {
    let mut out = vec![];
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let Some(rest) = line
            .strip_prefix("deb ")
            .or_else(|| line.strip_prefix("deb\t"))
        else {
            continue;
        };
        let mut rest = rest.trim_start();
        if rest.starts_with('[') {
            rest = rest.split_once(']').map_or("", |(_, r)| r.trim_start());
        }
        let mut words = rest.split_whitespace();
        if let (Some(uri), Some(suite)) = (words.next(), words.next()) {
            out.push(AptSource {
                uri: uri.trim_end_matches('/').to_string(),
                suite: suite.to_string(),
            });
        }
    }
    out
}

/// The `deb` entries of a deb822 `.sources` file (stanzas with `Enabled: no` skipped).
pub fn deb822_sources(text: &str) -> Vec<AptSource> {
    let mut out = vec![];
    for stanza in text.split("\n\n") {
        let mut fields: BTreeMap<String, String> = BTreeMap::new();
        let mut last = String::new();
        for line in stanza.lines() {
            if line.trim_start().starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if line.starts_with([' ', '\t']) {
                if let Some(v) = fields.get_mut(&last) {
                    v.push(' ');
                    v.push_str(line.trim());
                }
                continue;
            }
            if let Some((k, v)) = line.split_once(':') {
                last = k.trim().to_ascii_lowercase();
                fields.insert(last.clone(), v.trim().to_string());
            }
        }
        let field = |k: &str| fields.get(k).map(String::as_str).unwrap_or_default();
        if !field("types").split_whitespace().any(|t| t == "deb")
            || field("enabled").eq_ignore_ascii_case("no")
        {
            continue;
        }
        for uri in field("uris").split_whitespace() {
            for suite in field("suites").split_whitespace() {
                out.push(AptSource {
                    uri: uri.trim_end_matches('/').to_string(),
                    suite: suite.to_string(),
                });
            }
        }
    }
    out
}

/// The `deb` lines mmdebstrap gets for `suite`: the suite and its updates from the URI that
/// serves the plain release (`suite`, the host's own release `host`, or a rolling name), and
/// its security updates from the URI that serves a `-security` suite, if any.
pub fn mirror_lines(sources: &[AptSource], suite: &str, host: &str) -> Option<Vec<String>> {
    let plain = ["stable", "testing", "unstable", "sid"];
    let mirror = sources
        .iter()
        .find(|s| s.suite == suite || s.suite == host || plain.contains(&s.suite.as_str()))?;
    let mut lines = vec![
        format!("deb {} {suite} main", mirror.uri),
        format!("deb {} {suite}-updates main", mirror.uri),
    ];
    if let Some(security) = sources
        .iter()
        .find(|s| s.suite.ends_with("-security") || s.suite.ends_with("/updates"))
    {
        lines.push(format!("deb {} {suite}-security main", security.uri));
    }
    Some(lines)
}

/// The apt options the build repeats from the host's `apt-config dump`: a snapshot mirror's
/// release files are past their `Valid-Until`, and a host that accepts that says so.
pub fn relaxed_apt_options(dump: &str) -> Vec<String> {
    let mut out = vec![];
    for option in ["Acquire::Check-Valid-Until", "Acquire::Check-Date"] {
        let off = dump.lines().any(|l| {
            l.strip_prefix(option)
                .and_then(|v| v.trim().strip_prefix('"'))
                .and_then(|v| v.strip_suffix("\";"))
                .is_some_and(|v| matches!(v, "false" | "no" | "0"))
        });
        if off {
            out.push(format!("{option} \"false\""));
        }
    }
    out
}

/// The host's apt sources: `/etc/apt/sources.list`, `sources.list.d/*.list` and `*.sources`.
pub fn host_sources() -> Vec<AptSource> {
    let mut out =
        one_line_sources(&std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default());
    let mut files: Vec<PathBuf> = std::fs::read_dir("/etc/apt/sources.list.d")
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        match f.extension().and_then(|e| e.to_str()) {
            Some("list") => out.extend(one_line_sources(&text)),
            Some("sources") => out.extend(deb822_sources(&text)),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_sources_are_read_in_both_formats() {
        let one = "# comment\ndeb [signed-by=/k.gpg] http://a.example/debian/ bookworm main\ndeb-src http://a.example/debian bookworm main\ndeb http://s.example/debian-security bookworm-security main # x\n";
        assert_eq!(
            one_line_sources(one),
            [
                AptSource {
                    uri: "http://a.example/debian".into(),
                    suite: "bookworm".into()
                },
                AptSource {
                    uri: "http://s.example/debian-security".into(),
                    suite: "bookworm-security".into()
                },
            ]
        );
        let deb822 = "Types: deb\n# note\nURIs: http://a.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb deb-src\nURIs: http://s.example/debian-security\nSuites: bookworm-security\n\nTypes: deb\nEnabled: no\nURIs: http://off.example/debian\nSuites: trixie\n";
        let got = deb822_sources(deb822);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[1].suite, "bookworm-updates");
        assert_eq!(got[2].uri, "http://s.example/debian-security");
        let lines = mirror_lines(&got, "bookworm", "bookworm").unwrap();
        assert_eq!(
            lines,
            [
                "deb http://a.example/debian bookworm main",
                "deb http://a.example/debian bookworm-updates main",
                "deb http://s.example/debian-security bookworm-security main",
            ]
        );
        assert_eq!(mirror_lines(&got[2..], "bookworm", "trixie"), None);
    }

    #[test]
    fn relaxed_apt_options_follow_the_host() {
        let dump = "Acquire::Check-Valid-Until \"false\";\nAcquire::Check-Date \"true\";\n";
        assert_eq!(
            relaxed_apt_options(dump),
            ["Acquire::Check-Valid-Until \"false\""]
        );
        assert!(relaxed_apt_options("APT::Architecture \"amd64\";\n").is_empty());
    }
}
