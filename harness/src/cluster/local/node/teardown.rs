//! Removing what a real node leaves on the host: [`RealNode::cleanup`] kills the processes in
//! its cgroups and its containerd's shims, unmounts what is mounted under its directories,
//! removes its iptables rules ([`iptables_cleanup`]), bridge, cgroups, `/run` directory and
//! container log links, and portmap's shared chains when it is the host's last real node
//! ([`shared_chains_cleanup`]); [`RealNode::leftovers`] lists what of it is still there.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::probe::cgroup_hierarchies;
use super::{KUBELET_TURN, RUN_ROOT, RUNTIME_DIR_LINK, RealNode, ip, run_host};

/// Whether `path` is a symlink to `/run`.
fn links_to_run(path: &Path) -> bool {
    fs::read_link(path).is_ok_and(|t| t == Path::new("/run"))
}

impl RealNode {
    /// Removes everything the node made outside the cluster directory, whatever state it is
    /// in: the processes in its cgroups and containerd's shims are killed, mounts under its
    /// directories unmounted, its iptables rules, bridge, cgroups and `/run` directory
    /// removed. Its kubelet and containerd must be stopped first. Returns every error met.
    pub fn cleanup(&self) -> Vec<String> {
        let mut errors = vec![];
        kill_shims(&self.socket());
        for h in cleanup_hierarchies() {
            kill_cgroup_tree(&h.join(self.cgroup()));
        }
        for root in [&self.run_dir, &self.dir] {
            errors.extend(unmount_under(root));
        }
        errors.extend(remove_iptables_rules(&self.network(), &self.cidr()));
        if Path::new("/sys/class/net").join(self.bridge()).exists()
            && let Err(e) = ip(&["link", "delete", &self.bridge()])
        {
            errors.push(e.to_string());
        }
        for h in cleanup_hierarchies() {
            errors.extend(remove_cgroup_tree(&h.join(self.cgroup())));
        }
        errors.extend(remove_container_log_links(&self.dir));
        if self.run_dir.exists()
            && let Err(e) = crate::toolchain::cache::make_writable_and_remove(&self.run_dir)
        {
            errors.push(format!("remove {}: {e}", self.run_dir.display()));
        }
        errors.extend(remove_shared_chains(&self.run_dir));
        // The shared parent (with the kubelets' start lock) and link go with the host's last
        // real node.
        if other_nodes(&self.run_dir) == 0 {
            let _ = fs::remove_file(Path::new(RUN_ROOT).join(KUBELET_TURN));
        }
        let _ = fs::remove_dir(RUN_ROOT);
        let link = Path::new(RUNTIME_DIR_LINK);
        if !Path::new(RUN_ROOT).exists()
            && links_to_run(link)
            && let Err(e) = fs::remove_file(link)
        {
            errors.push(format!("remove {}: {e}", link.display()));
        }
        errors
    }

    /// What of this node is still on the host: processes in its cgroups, its containerd's
    /// shims, mounts under its directories, its bridge, iptables rules and cgroups, its `/run`
    /// directory and container log links. Empty once [`RealNode::cleanup`] has run.
    pub fn leftovers(&self) -> Vec<String> {
        let mut out = vec![];
        let sock = self.socket().display().to_string();
        out.extend(shims_of(&sock));
        for h in cleanup_hierarchies() {
            let d = h.join(self.cgroup());
            if d.exists() {
                out.push(format!("cgroup {}", d.display()));
            }
        }
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for root in [&self.run_dir, &self.dir] {
            out.extend(
                mounts_under(&info, root)
                    .into_iter()
                    .map(|m| format!("mount {}", m.display())),
            );
        }
        if Path::new("/sys/class/net").join(self.bridge()).exists() {
            out.push(format!("bridge {}", self.bridge()));
        }
        if let Ok(save) = run_host("iptables-save", &["-t", "nat"]) {
            out.extend(
                save.lines()
                    .filter(|l| l.contains(&self.network()))
                    .map(|l| format!("iptables rule {l}")),
            );
            out.extend(
                pod_chains(&save, &self.cidr())
                    .into_iter()
                    .map(|c| format!("iptables chain {c}")),
            );
        }
        if self.run_dir.exists() {
            out.push(format!("directory {}", self.run_dir.display()));
        }
        if !Path::new(RUN_ROOT).exists() && links_to_run(Path::new(RUNTIME_DIR_LINK)) {
            out.push(format!("symlink {RUNTIME_DIR_LINK}"));
        }
        for e in fs::read_dir(CONTAINER_LOG_LINKS)
            .into_iter()
            .flatten()
            .flatten()
        {
            if fs::read_link(e.path()).is_ok_and(|t| t.starts_with(&self.dir)) {
                out.push(format!("log link {}", e.path().display()));
            }
        }
        out
    }
}

/// Where every kubelet links its containers' logs (a path it does not let one configure).
pub const CONTAINER_LOG_LINKS: &str = "/var/log/containers";

/// Removes the links in [`CONTAINER_LOG_LINKS`] that point into `node_dir`, and the directory
/// itself once it is empty.
fn remove_container_log_links(node_dir: &Path) -> Vec<String> {
    let dir = Path::new(CONTAINER_LOG_LINKS);
    let mut errors = vec![];
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if fs::read_link(e.path()).is_ok_and(|t| t.starts_with(node_dir))
            && let Err(err) = fs::remove_file(e.path())
        {
            errors.push(format!("remove {}: {err}", e.path().display()));
        }
    }
    let _ = fs::remove_dir(dir);
    errors
}

/// Where a node's cgroups may be: [`cgroup_hierarchies`] plus the hybrid `unified` mount,
/// under which containerd also files its tasks.
pub(crate) fn cleanup_hierarchies() -> Vec<PathBuf> {
    let mut out = cgroup_hierarchies();
    out.push("/sys/fs/cgroup/unified".into());
    out
}

/// Every cgroup directory under `dir`, deepest first.
fn cgroup_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if !d.is_dir() {
            continue;
        }
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
        out.push(d);
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out
}

/// SIGKILLs every process in the cgroup tree at `dir` until none is left (bounded).
pub(crate) fn kill_cgroup_tree(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<i32> = cgroup_dirs(dir)
            .iter()
            .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Removes the cgroup tree at `dir`, deepest first.
pub(crate) fn remove_cgroup_tree(dir: &Path) -> Vec<String> {
    let mut errors = vec![];
    for d in cgroup_dirs(dir) {
        // A cgroup whose last process just died may be busy for a moment.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match fs::remove_dir(&d) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) if Instant::now() > deadline => {
                    errors.push(format!("remove cgroup {}: {e}", d.display()));
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
    errors
}

/// SIGKILLs the containerd shims serving the containerd at `socket`.
pub(crate) fn kill_shims(socket: &Path) {
    let sock = socket.display().to_string();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_shim = args.first().is_some_and(|a| a.contains("containerd-shim"));
        if is_shim && args.windows(2).any(|w| w[0] == "-address" && w[1] == sock) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The mount points at or under `root`, deepest first, from `/proc/self/mountinfo` text.
pub fn mounts_under(mountinfo: &str, root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_path)
        .map(PathBuf::from)
        .filter(|p| p.starts_with(root))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out.dedup();
    out
}

fn unescape_mount_path(s: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v as char);
            i += 4;
            continue;
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

/// Unmounts (lazily) every mount at or under `root`.
pub(crate) fn unmount_under(root: &Path) -> Vec<String> {
    let mut errors = vec![];
    // A mount may hide others; go round until none is left.
    for _ in 0..5 {
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts = mounts_under(&info, root);
        if mounts.is_empty() {
            return errors;
        }
        errors.clear();
        for m in mounts {
            if let Err(e) = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH)
                && e != nix::errno::Errno::EINVAL
                && e != nix::errno::Errno::ENOENT
            {
                errors.push(format!("unmount {}: {e}", m.display()));
            }
        }
    }
    errors
}

/// The iptables commands that remove the rules tagged with CNI network `network` (portmap's
/// DNAT jumps) and the per-container chains of the network's pods, subnet `cidr`
/// ([`pod_chains`]). `save` is the text of `iptables-save -t nat`. portmap's shared chains
/// are [`shared_chains_cleanup`]'s.
pub fn iptables_cleanup(save: &str, network: &str, cidr: &str) -> Vec<Vec<String>> {
    let tag = format!("name: \\\"{network}\\\"");
    let mut cmds = vec![];
    let mut chains = vec![];
    for r in save.lines().filter(|l| l.starts_with("-A ")) {
        if r.contains(&tag) {
            cmds.push(delete_rule(r));
            if let Some(target) = r.split(" -j ").nth(1) {
                let target = target.split_whitespace().next().unwrap_or_default();
                if target.starts_with("CNI-DN-") && !chains.iter().any(|c| c == target) {
                    chains.push(target.to_string());
                }
            }
        }
    }
    for c in pod_chains(save, cidr) {
        if !chains.contains(&c) {
            chains.push(c);
        }
    }
    for c in &chains {
        cmds.push(vec!["-t".into(), "nat".into(), "-F".into(), c.clone()]);
        cmds.push(vec!["-t".into(), "nat".into(), "-X".into(), c.clone()]);
    }
    cmds
}

/// portmap's per-container chains (`CNI-DN-…`) that forward to a pod of subnet `cidr`
/// (`10.a.b.0/24`): found by what they do, not by the tagged rule that jumps to them, so a
/// chain whose jump is gone is still its network's.
pub fn pod_chains(save: &str, cidr: &str) -> Vec<String> {
    let pods = format!("--to-destination {}", cidr.trim_end_matches("0/24"));
    let mut chains: Vec<String> = vec![];
    for r in save.lines() {
        let Some(rest) = r.strip_prefix("-A CNI-DN-") else {
            continue;
        };
        let chain = format!(
            "CNI-DN-{}",
            rest.split_whitespace().next().unwrap_or_default()
        );
        if r.contains(&pods) && !chains.contains(&chain) {
            chains.push(chain);
        }
    }
    chains
}

/// portmap's chains shared by every CNI network on the host.
const SHARED_CHAINS: [&str; 3] = [
    "CNI-HOSTPORT-DNAT",
    "CNI-HOSTPORT-MASQ",
    "CNI-HOSTPORT-SETMARK",
];

/// The iptables commands that remove portmap's shared chains (and the jumps into them) when
/// no rule is left in `CNI-HOSTPORT-DNAT` (no network's port is forwarded any more) and no
/// other chain jumps to `CNI-HOSTPORT-SETMARK`. `save` is
/// the text of `iptables-save -t nat`, read once every node's own rules are gone. Only the
/// host's last real node may run them: another node's per-container chains jump to
/// `CNI-HOSTPORT-SETMARK`, and its forwarded ports live in `CNI-HOSTPORT-DNAT`.
pub fn shared_chains_cleanup(save: &str) -> Vec<Vec<String>> {
    let rules: Vec<&str> = save.lines().filter(|l| l.starts_with("-A ")).collect();
    // A forwarded port, or a chain outside the shared ones that still jumps into them
    // (another user's), keeps them.
    let in_use = rules.iter().any(|r| {
        r.starts_with("-A CNI-HOSTPORT-DNAT ")
            || (r.contains("-j CNI-HOSTPORT-SETMARK")
                && !SHARED_CHAINS
                    .iter()
                    .any(|c| r.starts_with(&format!("-A {c} "))))
    });
    if in_use {
        return vec![];
    }
    let mut cmds = vec![];
    for r in &rules {
        if r.contains("-j CNI-HOSTPORT-DNAT") || r.contains("-j CNI-HOSTPORT-MASQ") {
            cmds.push(delete_rule(r));
        }
    }
    for c in SHARED_CHAINS {
        if save.lines().any(|l| l.starts_with(&format!(":{c} "))) {
            cmds.push(vec!["-t".into(), "nat".into(), "-F".into(), c.into()]);
            cmds.push(vec!["-t".into(), "nat".into(), "-X".into(), c.into()]);
        }
    }
    cmds
}

/// `-A CHAIN rest...` as the arguments of `iptables -t nat -D CHAIN rest...`. iptables-save
/// quotes a rule's arguments as a POSIX shell reads them (`--comment "name: \"x\""`), so they
/// are split as a shell splits them; a rule that does not split (never seen) keeps its words
/// as they are, and the delete fails saying so.
fn delete_rule(rule: &str) -> Vec<String> {
    let rest = rule.trim_start_matches("-A ");
    let mut args = vec!["-t".to_string(), "nat".to_string(), "-D".to_string()];
    args.extend(
        shlex::split(rest).unwrap_or_else(|| rest.split_whitespace().map(String::from).collect()),
    );
    args
}

/// Removes the rules and chains [`iptables_cleanup`] lists for CNI network `network` of
/// subnet `cidr`.
fn remove_iptables_rules(network: &str, cidr: &str) -> Vec<String> {
    let Ok(save) = run_host("iptables-save", &["-t", "nat"]) else {
        // No iptables: nothing of ours can be there.
        return vec![];
    };
    run_iptables(iptables_cleanup(&save, network, cidr))
}

/// Removes portmap's shared chains ([`shared_chains_cleanup`]) when no real node but the one
/// being removed is left on the host ([`other_nodes`]). Nodes
/// ending at once may each see the other's directory and leave the chains; the last to look
/// removes them.
fn remove_shared_chains(own: &Path) -> Vec<String> {
    if other_nodes(own) > 0 {
        return vec![];
    }
    let Ok(save) = run_host("iptables-save", &["-t", "nat"]) else {
        return vec![];
    };
    run_iptables(shared_chains_cleanup(&save))
}

/// How many real nodes other than the one whose run directory is `own` are on the host: the
/// run directories under [`RUN_ROOT`] (each made before its node's containerd starts, removed
/// by its cleanup).
fn other_nodes(own: &Path) -> usize {
    fs::read_dir(RUN_ROOT).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name() != KUBELET_TURN && e.path() != own)
            .count()
    })
}

/// Runs each `iptables` command; a shared chain's rule or chain that another node's cleanup
/// removed since `iptables-save` was read is gone, which is what was wanted.
fn run_iptables(cmds: Vec<Vec<String>>) -> Vec<String> {
    let mut errors = vec![];
    for cmd in cmds {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let shared = cmd.iter().any(|a| a.starts_with("CNI-HOSTPORT-"));
        match run_host("iptables", &args) {
            Err(e) if shared && already_gone(&e.to_string()) => {}
            Err(e) => errors.push(e.to_string()),
            Ok(_) => {}
        }
    }
    errors
}

/// Whether an iptables error says the rule or chain is not there (any more).
fn already_gone(message: &str) -> bool {
    message.contains("No chain/target/match by that name")
        || message.contains("does a matching rule exist in that chain")
}

/// `shim process <pid>` for each live containerd shim of the containerd at socket `sock`.
pub(crate) fn shims_of(sock: &str) -> Vec<String> {
    let mut out = vec![];
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains("containerd-shim") && text.contains(sock) {
            out.push(format!("shim process {}", e.file_name().to_string_lossy()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_chain_another_cleanup_removed_is_not_an_error() {
        assert!(already_gone(
            "`iptables -t nat -X CNI-HOSTPORT-DNAT` failed: iptables: No chain/target/match by that name."
        ));
        assert!(already_gone(
            "iptables: Bad rule (does a matching rule exist in that chain?)."
        ));
        assert!(!already_gone(
            "iptables: Permission denied (you must be root)."
        ));
    }

    #[test]
    fn mounts_under_a_root_come_deepest_first() {
        let info = "36 35 98:0 / /c/nodes/n/kubelet rw - ext4 /dev/vda rw\n\
                    37 36 0:5 / /c/nodes/n/kubelet/pods/x/volumes/a\\040b rw - tmpfs tmpfs rw\n\
                    38 35 0:6 / /other rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mounts_under(info, Path::new("/c/nodes/n")),
            [
                PathBuf::from("/c/nodes/n/kubelet/pods/x/volumes/a b"),
                PathBuf::from("/c/nodes/n/kubelet"),
            ]
        );
    }

    #[test]
    fn iptables_cleanup_removes_the_networks_rules_and_chains_not_the_shared_ones() {
        let save = r#"*nat
:PREROUTING ACCEPT [0:0]
:CNI-DN-71632fb5294fc93522689 - [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-HOSTPORT-MASQ - [0:0]
:CNI-HOSTPORT-SETMARK - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A CNI-DN-71632fb5294fc93522689 -p tcp -m tcp --dport 18080 -j DNAT --to-destination 10.201.7.2:80
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"harness-0a1b2c3d\" id: \"dc58\"" -m multiport --dports 18080 -j CNI-DN-71632fb5294fc93522689
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
COMMIT
"#;
        let cmds = iptables_cleanup(save, "harness-0a1b2c3d", "10.201.7.0/24");
        let flat: Vec<String> = cmds.iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            flat[0],
            "-t nat -D CNI-HOSTPORT-DNAT -p tcp -m comment --comment dnat name: \"harness-0a1b2c3d\" id: \"dc58\" -m multiport --dports 18080 -j CNI-DN-71632fb5294fc93522689"
        );
        assert!(
            cmds[0].contains(&"dnat name: \"harness-0a1b2c3d\" id: \"dc58\"".to_string()),
            "the comment is one argument: {:?}",
            cmds[0]
        );
        assert!(flat.contains(&"-t nat -X CNI-DN-71632fb5294fc93522689".to_string()));
        assert!(
            !flat.iter().any(|c| c.contains("CNI-HOSTPORT-SETMARK")
                || c.contains("-D PREROUTING")
                || c.contains("-X CNI-HOSTPORT-")),
            "a network's own cleanup leaves portmap's shared chains: {flat:#?}"
        );
        let other = save.replace(
            "COMMIT",
            "-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"other\\\" id: \\\"x\\\"\" -j CNI-DN-1\nCOMMIT",
        );
        assert!(iptables_cleanup(&other, "nobody", "10.9.9.0/24").is_empty());
    }

    #[test]
    fn a_pod_chain_whose_jump_is_gone_is_still_its_networks() {
        let save = r#"*nat
:CNI-DN-a87dcf94917ac3aecf9bb - [0:0]
:CNI-DN-b1 - [0:0]
:CNI-HOSTPORT-SETMARK - [0:0]
-A CNI-DN-a87dcf94917ac3aecf9bb -s 10.203.89.0/24 -p tcp -m tcp --dport 10685 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-a87dcf94917ac3aecf9bb -p tcp -m tcp --dport 10685 -j DNAT --to-destination 10.203.89.2:8080
-A CNI-DN-b1 -p tcp -m tcp --dport 10686 -j DNAT --to-destination 10.203.8.2:8080
COMMIT
"#;
        assert_eq!(
            pod_chains(save, "10.203.89.0/24"),
            ["CNI-DN-a87dcf94917ac3aecf9bb"]
        );
        assert_eq!(pod_chains(save, "10.203.8.0/24"), ["CNI-DN-b1"]);
        let flat: Vec<String> = iptables_cleanup(save, "harness-gone", "10.203.89.0/24")
            .iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            flat,
            [
                "-t nat -F CNI-DN-a87dcf94917ac3aecf9bb",
                "-t nat -X CNI-DN-a87dcf94917ac3aecf9bb"
            ]
        );
        // A pod chain that still jumps to the shared chains keeps them.
        assert!(shared_chains_cleanup(save).is_empty());
    }

    #[test]
    fn shared_chains_go_only_once_no_port_is_forwarded() {
        let idle = r#"*nat
:PREROUTING ACCEPT [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-HOSTPORT-MASQ - [0:0]
:CNI-HOSTPORT-SETMARK - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
COMMIT
"#;
        let flat: Vec<String> = shared_chains_cleanup(idle)
            .iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            flat,
            [
                "-t nat -D PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
                "-t nat -D POSTROUTING -m comment --comment CNI portfwd requiring masquerade -j CNI-HOSTPORT-MASQ",
                "-t nat -F CNI-HOSTPORT-DNAT",
                "-t nat -X CNI-HOSTPORT-DNAT",
                "-t nat -F CNI-HOSTPORT-MASQ",
                "-t nat -X CNI-HOSTPORT-MASQ",
                "-t nat -F CNI-HOSTPORT-SETMARK",
                "-t nat -X CNI-HOSTPORT-SETMARK",
            ]
        );
        // A port still forwarded (another network's) keeps them all.
        let busy = idle.replace(
            "COMMIT",
            "-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"other\\\" id: \\\"x\\\"\" -j CNI-DN-1\nCOMMIT",
        );
        assert!(shared_chains_cleanup(&busy).is_empty());
        assert!(shared_chains_cleanup("*nat\nCOMMIT\n").is_empty());
    }
}
