//! Real nodes: a kubelet with its own containerd beside a kwok node runs real containers
//! pulled from the cluster's local registry — with IPs on the node's bridge, hostPorts,
//! probes, exec and cgroup limits on the host — and everything a real node makes on the host
//! is removed on every exit path: destroy, panic, Ctrl-C, and SIGKILL followed by `gc`.
//! Needs root (as CI runs).

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Cli, provider, wait_exit, within};
use harness::cluster::local::node::RealNode;
use harness::cluster::local::state::ClusterState;
use harness::cluster::{Cluster, ClusterProvider, Profile};
use harness::toolchain::KubeVersion;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::wait::{Condition, await_condition};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn profile() -> Profile {
    let mut p = Profile::new(KubeVersion::default_version());
    p.set_nodes(1, &["zone-a"], &Default::default()).unwrap();
    p.set_real_nodes(1, &["zone-a"], &Default::default())
        .unwrap();
    p
}

/// `cluster up` arguments for one kwok node and one real node.
const REAL: &[&str] = &["--nodes", "1", "--real-nodes", "1"];

fn real_nodes(dir: &Path) -> Vec<RealNode> {
    ClusterState::load(&dir.join("cluster.json"))
        .unwrap()
        .real_nodes
}

fn assert_nothing_left(nodes: &[RealNode], dir: &Path) {
    assert_eq!(nodes.len(), 1, "the real node was recorded");
    for n in nodes {
        let left = n.leftovers();
        assert!(left.is_empty(), "{} left: {left:#?}", n.name);
    }
    assert!(!dir.exists(), "{} still exists", dir.display());
}

/// A pod on the real node: the health image serving on 8080, published on host port
/// `host_port`, ready while `/readyz` answers, limited to 64 MiB.
fn health_pod(host_port: u16) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "health"},
        "spec": {
            "nodeSelector": {"harness.io/node": "real"},
            "tolerations": [{"key": "harness.io/real-node", "operator": "Exists"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": "harness.local/health:v1",
                "ports": [{"containerPort": 8080, "hostPort": host_port}],
                "readinessProbe": {
                    "httpGet": {"path": "/readyz", "port": 8080},
                    "periodSeconds": 1,
                    "failureThreshold": 1,
                },
                "resources": {"limits": {"memory": "64Mi", "cpu": "200m"}},
            }],
        },
    }))
    .unwrap()
}

fn ready(want: bool) -> impl Condition<Pod> {
    move |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Ready" && c.status == if want { "True" } else { "False" })
            })
    }
}

async fn describe(pods: &Api<Pod>) -> String {
    format!(
        "{:?}",
        pods.get_opt("health")
            .await
            .map(|p| p.and_then(|p| p.status))
    )
}

/// Makes [`health_pod`] on a free host port in `pods`' namespace and waits until it is Ready
/// on the real node; returns the port.
async fn health_pod_ready(pods: &Api<Pod>) -> u16 {
    let host_port = harness::cluster::local::free_port().unwrap();
    pods.create(&PostParams::default(), &health_pod(host_port))
        .await
        .unwrap();
    within(
        "the pod Ready on the real node",
        Duration::from_secs(60),
        await_condition(pods.clone(), "health", ready(true)),
        || describe(pods),
    )
    .await
    .unwrap();
    host_port
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test]
async fn a_real_node_runs_real_containers_and_destroy_removes_everything() {
    if !common::real_nodes_possible() {
        return;
    }
    let (p, _root) = provider();
    let started = Instant::now();
    let c = p.create("r", &profile()).await.unwrap();
    eprintln!("cluster with a real node ready in {:?}", started.elapsed());
    let dir = c.layout().dir.clone();
    let nodes = real_nodes(&dir);
    let node = nodes[0].clone();
    let client = c.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let host_port = health_pod_ready(&pods).await;
    let pod = pods.get("health").await.unwrap();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(node.name.as_str()));
    let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
    let prefix = node.cidr().trim_end_matches("0/24").to_string();
    assert!(ip.starts_with(&prefix), "{ip} is in {}", node.cidr());

    // The image was pulled from the local registry, not found on the node.
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let pulled = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|e| e.reason.as_deref() == Some("Pulled"));
    assert!(pulled, "a Pulled event");

    // The hostPort reaches the container through the node address.
    let reply = http_get(&format!("{}:{host_port}", node.ip()), "/healthz");
    assert!(reply.starts_with("HTTP/1.0 200"), "{reply}");

    // The memory limit is the pod's cgroup limit on the host (limits alone make the pod
    // Guaranteed, whose cgroups sit right under kubepods).
    let uid = pod.metadata.uid.clone().unwrap();
    let limit = Path::new("/sys/fs/cgroup/memory")
        .join(node.cgroup())
        .join("kubepods")
        .join(format!("pod{uid}"))
        .join("memory.limit_in_bytes");
    let limit =
        std::fs::read_to_string(&limit).unwrap_or_else(|e| panic!("{}: {e}", limit.display()));
    assert_eq!(limit.trim(), (64u64 << 20).to_string());

    // exec goes through the apiserver to the kubelet; the probe follows the container.
    let kubectl = harness::toolchain::Toolchain::new(
        harness::toolchain::Cache::from_env(),
        harness::progress::Progress::plain(),
    )
    .kubernetes(KubeVersion::default_version())
    .await
    .unwrap()
    .path("kubectl");
    let out = Command::new(&kubectl)
        .env("KUBECONFIG", c.kubeconfig())
        .args(["exec", "health", "--", "/health", "touch", "/tmp/unready"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    within(
        "the pod not Ready once /readyz fails",
        Duration::from_secs(30),
        await_condition(pods.clone(), "health", ready(false)),
        || describe(&pods),
    )
    .await
    .unwrap();

    assert!(node.leftovers().iter().any(|l| l.starts_with("cgroup")));
    c.destroy().unwrap();
    assert_nothing_left(&nodes, &dir);
}

/// Whether the host's nat table has chain `chain`.
fn nat_chain(chain: &str) -> bool {
    Command::new("iptables")
        .args(["-t", "nat", "-S", chain])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Two clusters' real nodes share portmap's chains: one ending while the other runs leaves
/// them to the other, and a port chain of the ending node whose jump was lost (as when another
/// cleanup flushed the shared chains under it) still goes with it, found by its pods' subnet.
#[tokio::test]
async fn a_real_node_ending_beside_another_leaves_it_its_chains_and_takes_all_of_its_own() {
    if !common::real_nodes_possible() {
        return;
    }
    let ((pa, _ra), (pb, _rb)) = (provider(), provider());
    let a = pa.create("a", &profile()).await.unwrap();
    let b = pb.create("b", &profile()).await.unwrap();
    let (dir_a, dir_b) = (a.layout().dir.clone(), b.layout().dir.clone());
    let (nodes_a, nodes_b) = (real_nodes(&dir_a), real_nodes(&dir_b));
    health_pod_ready(&Api::namespaced(a.client(), "default")).await;
    // Its port's chain, and the jump to it tagged with its network, which is then lost.
    let save = String::from_utf8(
        Command::new("iptables-save")
            .args(["-t", "nat"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let chains = harness::cluster::local::node::teardown::pod_chains(&save, &nodes_a[0].cidr());
    assert_eq!(chains.len(), 1, "one port chain of a's pod: {save}");
    let tag = nodes_a[0].network();
    let jump = save
        .lines()
        .find(|l| l.contains(&tag) && l.contains(&chains[0]))
        .unwrap_or_else(|| panic!("a jump tagged {tag} to {}: {save}", chains[0]));
    let mut delete = vec!["-t".to_string(), "nat".into(), "-D".into()];
    delete.extend(shlex::split(jump.trim_start_matches("-A ")).unwrap());
    let out = Command::new("iptables").args(&delete).output().unwrap();
    assert!(out.status.success(), "{out:?}");

    a.destroy().unwrap();
    assert_nothing_left(&nodes_a, &dir_a);
    assert!(!nat_chain(&chains[0]), "{} went with its node", chains[0]);
    for c in ["CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-SETMARK"] {
        assert!(nat_chain(c), "{c} stays while cluster b's real node runs");
    }
    b.destroy().unwrap();
    assert_nothing_left(&nodes_b, &dir_b);
}

#[tokio::test]
async fn a_panic_in_the_test_body_still_removes_the_real_node() {
    if !common::real_nodes_possible() {
        return;
    }
    let (p, _root) = provider();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let c = p.create("r", &profile()).await.unwrap();
        let dir = c.layout().dir.clone();
        tx.send((real_nodes(&dir), dir)).unwrap();
        panic!("the test body fails");
    });
    assert!(task.await.unwrap_err().is_panic());
    let (nodes, dir) = rx.await.unwrap();
    assert_nothing_left(&nodes, &dir);
}

#[test]
fn ctrl_c_removes_the_real_node() {
    if !common::real_nodes_possible() {
        return;
    }
    let cli = Cli::new();
    let mut child = cli.up_attached("c", REAL);
    let dir = cli.dir("c");
    let nodes = real_nodes(&dir);
    assert!(!nodes[0].leftovers().is_empty(), "the node is up");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(60)).code(),
        Some(130)
    );
    assert_nothing_left(&nodes, &dir);
}

#[test]
fn gc_removes_the_real_node_of_a_killed_run() {
    if !common::real_nodes_possible() {
        return;
    }
    let cli = Cli::new();
    let mut child = cli.up_attached("k", REAL);
    let dir = cli.dir("k");
    let nodes = real_nodes(&dir);
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert!(
        !nodes[0].leftovers().is_empty(),
        "the killed run left its node behind"
    );
    let out = cli.cmd().arg("gc").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed cluster `k`"));
    assert_nothing_left(&nodes, &dir);
}

/// As a user that is not root, every other test of this binary skips, saying so (and fails
/// with `CI` set): what the README says of `cargo test` without root.
#[test]
fn without_root_every_test_skips_saying_so_and_fails_in_ci() {
    common::root_tests_skip_without_root();
}
