//! The control plane as data: pure functions from a cluster's [`Layout`], [`Ports`] and
//! [`Profile`] to a [`ComponentSpec`] per process. Printed by `cluster up --dry-run` and
//! checked against golden files.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cluster::Profile;
use crate::process::ComponentSpec;

/// Where things live inside a cluster directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// The cluster directory.
    pub dir: PathBuf,
}

impl Layout {
    /// A layout rooted at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
    /// `pki/`
    pub fn pki(&self) -> PathBuf {
        self.dir.join("pki")
    }
    /// A file under `pki/`.
    pub fn pki_file(&self, name: &str) -> String {
        self.pki().join(name).display().to_string()
    }
    /// `logs/`
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }
    /// The log file of a component.
    pub fn log(&self, component: &str) -> PathBuf {
        self.logs().join(format!("{component}.log"))
    }
    /// etcd's data dir.
    pub fn etcd_data(&self) -> PathBuf {
        self.dir.join("etcd-data")
    }
    /// The admin kubeconfig (the one users get).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
    /// A component's kubeconfig.
    pub fn kubeconfig(&self, stem: &str) -> PathBuf {
        self.dir
            .join("kubeconfigs")
            .join(format!("{stem}.kubeconfig"))
    }
    /// kwok's configuration (stages).
    pub fn kwok_config(&self) -> PathBuf {
        self.dir.join("kwok.yaml")
    }
    /// The cluster's state record.
    pub fn state(&self) -> PathBuf {
        self.dir.join("cluster.json")
    }
    /// The scratch directory `kubectl exec` runs commands in on kwok nodes.
    pub fn kwok_exec_dir(&self) -> PathBuf {
        self.work("kwok-exec")
    }
    /// The file `kubectl logs` serves for pods on kwok nodes.
    pub fn kwok_pod_log(&self) -> PathBuf {
        self.dir.join("kwok-pod.log")
    }
    /// Scratch space for components that want a work dir.
    pub fn work(&self, component: &str) -> PathBuf {
        self.dir.join("work").join(component)
    }
}

/// The loopback ports a cluster listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    /// etcd clients.
    pub etcd_client: u16,
    /// etcd peers.
    pub etcd_peer: u16,
    /// kube-apiserver.
    pub apiserver: u16,
    /// kube-controller-manager health/metrics.
    pub controller_manager: u16,
    /// kube-scheduler health/metrics.
    pub scheduler: u16,
    /// kwok's health/metrics server.
    pub kwok: u16,
}

/// The binaries the cluster runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// etcd
    pub etcd: PathBuf,
    /// kube-apiserver
    pub apiserver: PathBuf,
    /// kube-controller-manager
    pub controller_manager: PathBuf,
    /// kube-scheduler
    pub scheduler: PathBuf,
    /// kwok
    pub kwok: PathBuf,
    /// The harness binary itself (runs the storage provisioner).
    pub harness: PathBuf,
    /// What real nodes run, when the profile has any.
    pub real: Option<RealBinaries>,
}

/// The binaries and host tools of real nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealBinaries {
    /// The kubelet of the cluster's Kubernetes version.
    pub kubelet: PathBuf,
    /// containerd, runc, the CNI plugins.
    pub tools: super::node::HostTools,
    /// The image registry that serves the images to the nodes.
    pub registry: PathBuf,
    /// The images it serves.
    pub images: Vec<crate::toolchain::BuiltImage>,
}

/// Everything the component functions read.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// Paths.
    pub layout: &'a Layout,
    /// Ports.
    pub ports: &'a Ports,
    /// What the cluster is.
    pub profile: &'a Profile,
    /// Which binaries.
    pub binaries: &'a Binaries,
}

/// The service CIDR (the apiserver's service IP is its first address).
pub const SERVICE_CIDR: &str = "10.96.0.0/16";

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// All components in start order.
pub fn all(i: Inputs<'_>) -> Vec<ComponentSpec> {
    vec![
        etcd(i),
        kube_apiserver(i),
        kube_controller_manager(i),
        kube_scheduler(i),
        kwok(i),
        provisioner(i),
    ]
}

/// etcd: one member, TLS with client-certificate auth on clients and peers.
pub fn etcd(i: Inputs<'_>) -> ComponentSpec {
    let l = i.layout;
    let client = format!("https://127.0.0.1:{}", i.ports.etcd_client);
    let peer = format!("https://127.0.0.1:{}", i.ports.etcd_peer);
    let args = vec![
        "--name=harness".into(),
        format!("--data-dir={}", path(&l.etcd_data())),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=harness={peer}"),
        "--initial-cluster-state=new".into(),
        format!("--cert-file={}", l.pki_file("etcd.crt")),
        format!("--key-file={}", l.pki_file("etcd.key")),
        format!("--trusted-ca-file={}", l.pki_file("ca.crt")),
        "--client-cert-auth=true".into(),
        format!("--peer-cert-file={}", l.pki_file("etcd.crt")),
        format!("--peer-key-file={}", l.pki_file("etcd.key")),
        format!("--peer-trusted-ca-file={}", l.pki_file("ca.crt")),
        "--peer-client-cert-auth=true".into(),
        // A test cluster trades durability for speed.
        "--unsafe-no-fsync=true".into(),
        "--snapshot-count=100000".into(),
        "--log-level=warn".into(),
    ];
    ComponentSpec {
        name: "etcd".into(),
        binary: i.binaries.etcd.clone(),
        args,
        env: vec![],
        clear_env: false,
        dir: None,
    }
}

fn gates_arg(p: &Profile) -> Option<String> {
    (!p.feature_gates.is_empty()).then(|| {
        format!(
            "--feature-gates={}",
            p.feature_gates
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        )
    })
}

/// kube-apiserver: loopback only, TLS, client-cert authentication, RBAC, the default admission
/// plugins (Priority among them), and a service-account signer for the TokenRequest API.
pub fn kube_apiserver(i: Inputs<'_>) -> ComponentSpec {
    let l = i.layout;
    let mut args = vec![
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={}", i.ports.apiserver),
        // Endpoints may not hold loopback addresses; nothing in the cluster dials the
        // `kubernetes` service, so the reconciler is off.
        "--endpoint-reconciler-type=none".into(),
        format!("--etcd-servers=https://127.0.0.1:{}", i.ports.etcd_client),
        format!("--etcd-cafile={}", l.pki_file("ca.crt")),
        format!(
            "--etcd-certfile={}",
            l.pki_file("apiserver-etcd-client.crt")
        ),
        format!("--etcd-keyfile={}", l.pki_file("apiserver-etcd-client.key")),
        format!("--tls-cert-file={}", l.pki_file("apiserver.crt")),
        format!("--tls-private-key-file={}", l.pki_file("apiserver.key")),
        format!("--client-ca-file={}", l.pki_file("ca.crt")),
        format!(
            "--kubelet-client-certificate={}",
            l.pki_file("apiserver-kubelet-client.crt")
        ),
        format!(
            "--kubelet-client-key={}",
            l.pki_file("apiserver-kubelet-client.key")
        ),
        // Real nodes are reached at their InternalIP (their names do not resolve).
        "--kubelet-preferred-address-types=InternalIP,Hostname".into(),
        // Node authorization and NodeRestriction, as on a real cluster, for real nodes'
        // kubelets (which authenticate as system:node:<name>).
        "--authorization-mode=Node,RBAC".into(),
        "--enable-admission-plugins=NodeRestriction".into(),
        "--anonymous-auth=false".into(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", l.pki_file("sa.pub")),
        format!(
            "--service-account-signing-key-file={}",
            l.pki_file("sa.key")
        ),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        "--allow-privileged=true".into(),
        format!("--cert-dir={}", path(&l.work("kube-apiserver"))),
    ];
    args.extend(gates_arg(i.profile));
    if !i.profile.runtime_config.is_empty() {
        args.push(format!(
            "--runtime-config={}",
            i.profile
                .runtime_config
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    ComponentSpec {
        name: "kube-apiserver".into(),
        binary: i.binaries.apiserver.clone(),
        args,
        env: vec![],
        clear_env: false,
        dir: None,
    }
}

fn kube_client_args(l: &Layout, stem: &str) -> Vec<String> {
    let kc = path(&l.kubeconfig(stem));
    vec![
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
    ]
}

/// The secure port of component `stem`, on the loopback address with its serving certificate.
fn serving_args(l: &Layout, stem: &str, port: u16) -> [String; 4] {
    [
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!(
            "--tls-cert-file={}",
            l.pki_file(&format!("{stem}-serving.crt"))
        ),
        format!(
            "--tls-private-key-file={}",
            l.pki_file(&format!("{stem}-serving.key"))
        ),
    ]
}

/// kube-controller-manager: every default controller (garbage collector included), each
/// with its own service-account credentials.
pub fn kube_controller_manager(i: Inputs<'_>) -> ComponentSpec {
    let l = i.layout;
    let mut args = kube_client_args(l, "kube-controller-manager");
    args.extend(serving_args(
        l,
        "kube-controller-manager",
        i.ports.controller_manager,
    ));
    args.extend([
        "--leader-elect=false".into(),
        "--controllers=*".into(),
        "--use-service-account-credentials=true".into(),
        format!("--root-ca-file={}", l.pki_file("ca.crt")),
        format!(
            "--service-account-private-key-file={}",
            l.pki_file("sa.key")
        ),
        format!("--cluster-signing-cert-file={}", l.pki_file("ca.crt")),
        format!("--cluster-signing-key-file={}", l.pki_file("ca.key")),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        "--kube-api-qps=100".into(),
        "--kube-api-burst=200".into(),
    ]);
    args.extend(gates_arg(i.profile));
    ComponentSpec {
        name: "kube-controller-manager".into(),
        binary: i.binaries.controller_manager.clone(),
        args,
        env: vec![],
        clear_env: false,
        dir: None,
    }
}

/// kube-scheduler.
pub fn kube_scheduler(i: Inputs<'_>) -> ComponentSpec {
    let l = i.layout;
    let mut args = kube_client_args(l, "kube-scheduler");
    args.extend(serving_args(l, "kube-scheduler", i.ports.scheduler));
    args.extend([
        "--leader-elect=false".into(),
        "--kube-api-qps=100".into(),
        "--kube-api-burst=200".into(),
    ]);
    args.extend(gates_arg(i.profile));
    ComponentSpec {
        name: "kube-scheduler".into(),
        binary: i.binaries.scheduler.clone(),
        args,
        env: vec![],
        clear_env: false,
        dir: None,
    }
}

/// The label that marks the nodes kwok plays the kubelet for.
pub const KWOK_NODE_LABEL: (&str, &str) = ("type", "kwok");

/// The environment kwok runs with, and so the environment of every command `kubectl exec`
/// runs on a kwok node (kwok adds its exec rule's variables to its own environment).
pub const KWOK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// kwok: the kubelet of every fake node, driven by the stages in `kwok.yaml`. Its server (on
/// loopback, TLS with a certificate from the cluster CA) is every kwok node's kubelet endpoint,
/// so the apiserver can reach it for `kubectl exec` and `kubectl logs`. kwok starts with an
/// empty environment in the exec scratch directory, which exec'd commands inherit (see
/// [`super::kwok`]).
pub fn kwok(i: Inputs<'_>) -> ComponentSpec {
    let l = i.layout;
    let args = vec![
        format!("--kubeconfig={}", path(&l.kubeconfig("kwok"))),
        format!("--config={}", path(&l.kwok_config())),
        "--manage-all-nodes=false".into(),
        format!(
            "--manage-nodes-with-label-selector={}={}",
            KWOK_NODE_LABEL.0, KWOK_NODE_LABEL.1
        ),
        "--node-ip=127.0.0.1".into(),
        // Pod IPs outside the service range.
        "--cidr=10.244.0.0/16".into(),
        // The server listens on loopback only; the nodes advertise its port as their kubelet
        // port (`daemonEndpoints`, set by the node-init stage).
        format!("--server-address=127.0.0.1:{}", i.ports.kwok),
        format!("--node-port={}", i.ports.kwok),
        format!("--tls-cert-file={}", l.pki_file("kwok-serving.crt")),
        format!("--tls-private-key-file={}", l.pki_file("kwok-serving.key")),
        // Leases are renewed well inside the node controller's grace period, so nodes stay
        // Ready for the cluster's whole life.
        "--node-lease-duration-seconds=40".into(),
    ];
    ComponentSpec {
        name: "kwok".into(),
        binary: i.binaries.kwok.clone(),
        args,
        env: vec![
            // kwok also reads `$KWOK_WORKDIR/kwok.yaml`; keep it inside the cluster.
            ("KWOK_WORKDIR".into(), path(&l.work("kwok"))),
            ("PATH".into(), KWOK_PATH.into()),
        ],
        clear_env: true,
        dir: Some(l.kwok_exec_dir()),
    }
}

/// The storage provisioner (the harness binary's hidden `provisioner` command): makes a PV for
/// every PVC of the default StorageClass, like local-path-provisioner on kind.
pub fn provisioner(i: Inputs<'_>) -> ComponentSpec {
    ComponentSpec {
        name: "provisioner".into(),
        binary: i.binaries.harness.clone(),
        args: vec![
            "provisioner".into(),
            format!("--kubeconfig={}", path(&i.layout.kubeconfig("provisioner"))),
            format!("--volumes-dir={}", path(&i.layout.dir.join("volumes"))),
        ],
        env: vec![],
        clear_env: false,
        dir: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kwok_serves_the_node_port_on_loopback_over_tls_from_the_scratch_dir() {
        let layout = Layout::new("/c");
        let ports = Ports {
            etcd_client: 1,
            etcd_peer: 2,
            apiserver: 3,
            controller_manager: 4,
            scheduler: 5,
            kwok: 6,
        };
        let binaries = Binaries {
            etcd: "etcd".into(),
            apiserver: "kube-apiserver".into(),
            controller_manager: "kube-controller-manager".into(),
            scheduler: "kube-scheduler".into(),
            kwok: "kwok".into(),
            harness: "harness".into(),
            real: None,
        };
        let profile = Profile::new(crate::toolchain::KubeVersion::default_version());
        let spec = kwok(Inputs {
            layout: &layout,
            ports: &ports,
            profile: &profile,
            binaries: &binaries,
        });
        for arg in [
            "--server-address=127.0.0.1:6",
            "--node-port=6",
            "--tls-cert-file=/c/pki/kwok-serving.crt",
            "--tls-private-key-file=/c/pki/kwok-serving.key",
        ] {
            assert!(
                spec.args.iter().any(|a| a == arg),
                "{arg} in {:?}",
                spec.args
            );
        }
        // exec'd commands inherit kwok's directory and environment.
        assert_eq!(spec.dir, Some(PathBuf::from("/c/work/kwok-exec")));
        assert!(spec.clear_env);
        let names: Vec<&str> = spec.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["KWOK_WORKDIR", "PATH"]);
    }
}
