//! The per-cluster certificate authority and every key and certificate the control plane
//! needs: [`Pki`] writes them under `<cluster>/pki` and renders kubeconfigs.

use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::LocalError;

/// A client identity: common name and groups.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    /// File stem under `pki/`.
    pub file: &'static str,
    /// Subject common name (the user name).
    pub cn: &'static str,
    /// Subject organization (the group), if any.
    pub group: Option<&'static str>,
}

/// Client identities created for every cluster.
pub const CLIENTS: &[Identity] = &[
    Identity {
        file: "admin",
        cn: "kubernetes-admin",
        group: Some("system:masters"),
    },
    Identity {
        file: "kube-controller-manager",
        cn: "system:kube-controller-manager",
        group: None,
    },
    Identity {
        file: "kube-scheduler",
        cn: "system:kube-scheduler",
        group: None,
    },
    // kwok plays the kubelet of every fake node and the provisioner plays a storage driver;
    // both are cluster infrastructure, not systems under test.
    Identity {
        file: "kwok",
        cn: "harness:kwok",
        group: Some("system:masters"),
    },
    Identity {
        file: "provisioner",
        cn: "harness:provisioner",
        group: Some("system:masters"),
    },
    // The apiserver's identity towards kubelets (exec, logs, port-forward on real nodes).
    Identity {
        file: "apiserver-kubelet-client",
        cn: "kube-apiserver-kubelet-client",
        group: Some("system:masters"),
    },
    Identity {
        file: "apiserver-etcd-client",
        cn: "kube-apiserver-etcd-client",
        group: None,
    },
];

/// Serving certificates (all for 127.0.0.1 and localhost; the apiserver's also for its
/// in-cluster names).
pub const SERVERS: &[&str] = &[
    "apiserver",
    "etcd",
    "kube-controller-manager-serving",
    "kube-scheduler-serving",
    // kwok's server: the kubelet endpoint of every kwok node (exec, logs).
    "kwok-serving",
    // The local image registry real nodes pull from (see `cluster::local::registry`).
    "registry",
];

/// The cluster's PKI on disk.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Generates the CA, serving and client certificates and the service-account key.
    pub fn generate(dir: &Path) -> Result<Self, LocalError> {
        fs::create_dir_all(dir).map_err(|e| LocalError::io(dir, e))?;
        let pki = Self {
            dir: dir.to_path_buf(),
        };
        let ca_key = KeyPair::generate().map_err(LocalError::pki)?;
        let ca_params = ca_params()?;
        let ca_cert = ca_params.self_signed(&ca_key).map_err(LocalError::pki)?;
        pki.write("ca.crt", &ca_cert.pem())?;
        pki.write("ca.key", &ca_key.serialize_pem())?;
        let issuer = Issuer::new(ca_params, ca_key);

        for server in SERVERS {
            let mut sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
            if *server == "apiserver" {
                sans.extend(
                    [
                        "10.96.0.1",
                        "kubernetes",
                        "kubernetes.default",
                        "kubernetes.default.svc",
                        "kubernetes.default.svc.cluster.local",
                    ]
                    .map(String::from),
                );
            }
            let mut p = CertificateParams::new(sans).map_err(LocalError::pki)?;
            p.distinguished_name.push(DnType::CommonName, *server);
            p.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            pki.leaf(server, p, &issuer)?;
        }
        for id in CLIENTS {
            let mut p = CertificateParams::new(Vec::<String>::new()).map_err(LocalError::pki)?;
            p.distinguished_name.push(DnType::CommonName, id.cn);
            if let Some(g) = id.group {
                p.distinguished_name.push(DnType::OrganizationName, g);
            }
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            pki.leaf(id.file, p, &issuer)?;
        }
        let sa = KeyPair::generate().map_err(LocalError::pki)?;
        pki.write("sa.key", &sa.serialize_pem())?;
        pki.write("sa.pub", &sa.public_key_pem())?;
        Ok(pki)
    }

    /// Issues one more client certificate, `<stem>.crt`/`<stem>.key`, for user `cn` in
    /// `group` (e.g. a real node's kubelet: `system:node:<name>` in `system:nodes`).
    pub fn issue_client(
        &self,
        stem: &str,
        cn: &str,
        group: Option<&str>,
    ) -> Result<(), LocalError> {
        let key = KeyPair::from_pem(&self.read("ca.key")?).map_err(LocalError::pki)?;
        let issuer = Issuer::new(ca_params()?, key);
        let mut p = CertificateParams::new(Vec::<String>::new()).map_err(LocalError::pki)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        if let Some(g) = group {
            p.distinguished_name.push(DnType::OrganizationName, g);
        }
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.leaf(stem, p, &issuer)
    }

    /// Issues a serving certificate for 127.0.0.1 and localhost named `cn`, kept in memory
    /// (nothing is written): its certificate and key, PEM. For a server of the harness's own
    /// process (e.g. [`crate::cluster::proxy`]) that clients trusting the cluster CA reach.
    pub fn issue_serving(&self, cn: &str) -> Result<(String, String), LocalError> {
        let ca_key = KeyPair::from_pem(&self.read("ca.key")?).map_err(LocalError::pki)?;
        let issuer = Issuer::new(ca_params()?, ca_key);
        let mut p = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .map_err(LocalError::pki)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(LocalError::pki)?;
        let cert = p.signed_by(&key, &issuer).map_err(LocalError::pki)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    fn leaf(
        &self,
        stem: &str,
        params: CertificateParams,
        issuer: &Issuer<'_, KeyPair>,
    ) -> Result<(), LocalError> {
        let key = KeyPair::generate().map_err(LocalError::pki)?;
        let cert = params.signed_by(&key, issuer).map_err(LocalError::pki)?;
        self.write(&format!("{stem}.crt"), &cert.pem())?;
        self.write(&format!("{stem}.key"), &key.serialize_pem())
    }

    fn write(&self, name: &str, body: &str) -> Result<(), LocalError> {
        let path = self.dir.join(name);
        fs::write(&path, body).map_err(|e| LocalError::io(&path, e))?;
        if name.ends_with(".key") {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
                .map_err(|e| LocalError::io(&path, e))?;
        }
        Ok(())
    }

    /// The PKI already generated under `dir`.
    pub fn at(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// Path of a file under `pki/`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA certificate (PEM).
    pub fn ca_pem(&self) -> Result<String, LocalError> {
        self.read("ca.crt")
    }

    fn read(&self, name: &str) -> Result<String, LocalError> {
        let path = self.dir.join(name);
        fs::read_to_string(&path).map_err(|e| LocalError::io(&path, e))
    }

    /// A kubeconfig for client identity `stem` against `server`.
    pub fn kubeconfig(&self, server: &str, stem: &str) -> Result<String, LocalError> {
        Ok(render_kubeconfig(
            server,
            &self.ca_pem()?,
            &Credentials::ClientCert {
                cert_pem: self.read(&format!("{stem}.crt"))?,
                key_pem: self.read(&format!("{stem}.key"))?,
            },
            stem,
        ))
    }
}

/// The CA's parameters: the same every time, so that the stored CA key can issue more
/// certificates later under the same subject.
fn ca_params() -> Result<CertificateParams, LocalError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(LocalError::pki)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "harness-cluster-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca_params)
}

/// How a kubeconfig user authenticates.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// A client certificate and key (PEM).
    ClientCert {
        /// Certificate.
        cert_pem: String,
        /// Key.
        key_pem: String,
    },
    /// A bearer token (e.g. from the TokenRequest API).
    Token(String),
}

/// Renders a single-context kubeconfig.
pub fn render_kubeconfig(server: &str, ca_pem: &str, creds: &Credentials, user: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let user_body = match creds {
        Credentials::ClientCert { cert_pem, key_pem } => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(cert_pem),
            b64(key_pem)
        ),
        Credentials::Token(t) => format!("    token: {t}\n"),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: harness\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: harness\n  context:\n    cluster: harness\n    user: {user}\ncurrent-context: harness\nusers:\n- name: {user}\n  user:\n{user_body}",
        ca = b64(ca_pem),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_every_file_with_private_keys_closed() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(tmp.path()).unwrap();
        for s in SERVERS {
            assert!(pki.path(&format!("{s}.crt")).is_file());
        }
        for c in CLIENTS {
            let key = pki.path(&format!("{}.key", c.file));
            assert_eq!(
                fs::metadata(&key).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        let kc = pki.kubeconfig("https://127.0.0.1:6443", "admin").unwrap();
        assert!(kc.contains("server: https://127.0.0.1:6443"));
        assert!(kc.contains("client-key-data: "));
    }
}
