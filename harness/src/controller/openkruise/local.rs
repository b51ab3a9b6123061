//! The local install: the manager as a supervised local process beside the control plane, with
//! its own ServiceAccount's token, and the node daemons of real nodes ([`install_local`]).

use super::*;

/// What [`install_local`] started: the manager, a node daemon per real node, and the proxy in
/// front of the manager when [`InstallOptions::proxy`] asked for one.
#[derive(Debug)]
pub struct LocalInstall {
    /// The manager.
    pub manager: Manager,
    /// The node daemons, one per real node (none without real nodes).
    pub daemons: Vec<daemon::Daemon>,
    /// The proxy the manager talks to the apiserver through; the manager loses the apiserver
    /// when it is dropped.
    pub proxy: Option<ProxyHandle>,
}

/// Installs OpenKruise into `cluster` and waits until it is ready: CRDs established, webhook
/// configurations carrying the manager's URL and CA, the manager's readiness endpoint up, and a
/// smoke CloneSet admitted and reconciled; with real nodes, also every node daemon
/// ([`daemon::wait_ready`]). The manager only: see [`install_local`] for the daemons' handles
/// (the daemons run either way, as components of the cluster) and the proxy's (with
/// [`InstallOptions::proxy`], use [`install_local`]: this drops the proxy, and with it the
/// manager's way to the apiserver).
pub async fn install(
    cluster: &mut LocalCluster,
    toolchain: &Toolchain,
    options: &InstallOptions,
) -> Result<Manager, ControllerError> {
    Ok(install_local(cluster, toolchain, options).await?.manager)
}

/// [`install`], returning every component: the manager, and with real nodes
/// (`ClusterState::real_nodes`) the manager runs with `KruiseDaemon=true` and each real node
/// gets a daemon ([`daemon::start`]); the daemons share the manager's bound for readiness.
pub async fn install_local(
    cluster: &mut LocalCluster,
    toolchain: &Toolchain,
    options: &InstallOptions,
) -> Result<LocalInstall, ControllerError> {
    let tag = options.tag();
    let timeout = options.timeout.unwrap_or(Duration::from_secs(120));
    let started = Instant::now();
    let with_daemon = !cluster.state().real_nodes.is_empty();
    let kube_bins = toolchain
        .kubernetes(cluster.state().profile.kubernetes)
        .await?;
    let kubectl = kube_bins.path("kubectl");
    let reference = ControllerRef {
        kind: crate::controller::ControllerKind(FAMILY.name().into()),
        version: tag.clone(),
        checkout: options.checkout.clone(),
    };
    let (binary, daemon_binary, mut docs) = tokio::try_join!(
        async {
            match &options.checkout {
                Some(dir) => build_checkout(toolchain, dir).await,
                None => build(toolchain, &tag).await,
            }
            .map_err(ControllerError::from)
        },
        async {
            match with_daemon {
                true => daemon::build_ref(toolchain, &reference).await.map(Some),
                false => Ok(None),
            }
            .map_err(ControllerError::from)
        },
        render_for(&kubectl, &tag, options)
    )?;
    docs.retain(|d| !SKIPPED_KINDS.contains(&kind(d)));
    if let Some(t) = options.transform {
        t(&mut docs);
    }
    let client = cluster.client();
    apply_all(&client, &docs, timeout).await?;
    let token =
        crate::controller::service_account_token(&client, NAMESPACE, SERVICE_ACCOUNT).await?;
    let layout = cluster.layout().clone();
    let work = layout.work("kruise-manager");
    let (certs, log_dir) = (work.join("certs"), work.join("log"));
    for d in [&certs, &log_dir] {
        std::fs::create_dir_all(d).map_err(|e| ControllerError::io(d, e))?;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&log_dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| ControllerError::io(&log_dir, e))?;
    }
    let kubeconfig = layout.kubeconfig("kruise-manager");
    let credentials = Credentials::Token(token);
    let proxy = match options.proxy {
        true => Some(proxy::start_local(cluster).await?),
        false => None,
    };
    let server = proxy
        .as_ref()
        .map_or_else(|| cluster.server().to_string(), ProxyHandle::url);
    let text = render_kubeconfig(&server, &cluster.ca_pem()?, &credentials, BINARY);
    std::fs::write(&kubeconfig, text).map_err(|e| ControllerError::io(&kubeconfig, e))?;
    let ports = Ports {
        webhook: free_port()?,
        metrics: free_port()?,
        health: free_port()?,
        pprof: free_port()?,
    };
    let gates = manager_gates_for(&options.gates, with_daemon);
    let mut spec = manager_spec(&binary, &kubeconfig, &certs, &log_dir, &ports, &gates);
    drop_unknown_flags(&mut spec, &binary, OPTIONAL_FLAGS).await;
    // A manager stopped for an upgrade leaves its lease held; the next one would wait for it
    // to expire.
    release_lease(&client).await?;
    // As its Deployment's pod would be, it is started again when it exits.
    let supervisor = cluster.spawn_supervised(&spec)?;
    let manager = Manager {
        name: spec.name.clone(),
        version: tag.clone(),
        record: supervisor.current(),
        log: layout.log(&spec.name),
        webhook_port: ports.webhook,
        health_port: ports.health,
        gates: gates.clone(),
        supervisor: Some(supervisor),
        lease: Some((NAMESPACE.to_string(), LEASE.to_string())),
    };
    let daemons = match &daemon_binary {
        Some(binary) => daemon::start(cluster, binary, &tag, &gates).await?,
        None => vec![],
    };
    wait_ready(cluster, &manager, timeout).await?;
    let manager_ready = started.elapsed();
    daemon::wait_ready(&daemons, timeout).await?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        manager_ms = manager_ready.as_millis() as u64,
        daemons = daemons.len(),
        version = tag,
        "openkruise ready"
    );
    Ok(LocalInstall {
        manager,
        daemons,
        proxy,
    })
}

/// The manager's loopback ports.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// Webhook server (HTTPS).
    pub webhook: u16,
    /// Metrics.
    pub metrics: u16,
    /// Health and readiness probes.
    pub health: u16,
    /// pprof.
    pub pprof: u16,
}

/// The manager's leader-election lease (`--leader-election-id`, in [`NAMESPACE`]).
pub const LEASE: &str = "kruise-manager";

/// Deletes the manager's lease, if there is one.
async fn release_lease(client: &kube::Client) -> Result<(), ControllerError> {
    crate::controller::delete_lease(client, NAMESPACE, LEASE).await
}

/// Flags of [`manager_spec`] that not every release has (v1.5.0 lacks
/// `--protection-log-path`); a manager exits on an unknown flag.
pub(super) const OPTIONAL_FLAGS: &[&str] = &["--protection-log-path"];

/// Leaves out of `spec` the flags of `optional` that `binary`'s `--help` does not list.
pub(super) async fn drop_unknown_flags(spec: &mut ComponentSpec, binary: &Path, optional: &[&str]) {
    let help = crate::toolchain::help_text(binary)
        .await
        .unwrap_or_default();
    if help.is_empty() {
        return;
    }
    spec.args.retain(|a| {
        let flag = a.split('=').next().unwrap_or(a);
        !optional.contains(&flag) || help.contains(&format!("{flag} "))
    });
}

/// The manager process as data. Leader election is on, as the release ships it, with a renew
/// deadline that survives a loaded machine (the release's 10 s made a manager on a busy
/// 2-core host exit with "leader election lost" mid-run).
pub fn manager_spec(
    binary: &Path,
    kubeconfig: &Path,
    certs: &Path,
    log_dir: &Path,
    ports: &Ports,
    gates: &BTreeMap<String, bool>,
) -> ComponentSpec {
    ComponentSpec {
        name: "kruise-manager".into(),
        binary: binary.to_path_buf(),
        args: vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--metrics-addr=127.0.0.1:{}", ports.metrics),
            format!("--health-probe-addr=127.0.0.1:{}", ports.health),
            "--enable-pprof=true".into(),
            format!("--pprof-addr=127.0.0.1:{}", ports.pprof),
            "--enable-leader-election=true".into(),
            format!("--leader-election-namespace={NAMESPACE}"),
            "--leader-election-lease-duration=60s".into(),
            "--leader-election-renew-deadline=45s".into(),
            "--leader-election-retry-period=5s".into(),
            format!("--protection-log-path={}", log_dir.display()),
            gate_arg(gates),
        ],
        env: vec![
            ("KUBECONFIG".into(), kubeconfig.display().to_string()),
            ("POD_NAMESPACE".into(), NAMESPACE.into()),
            ("WEBHOOK_HOST".into(), "127.0.0.1".into()),
            ("WEBHOOK_PORT".into(), ports.webhook.to_string()),
            ("WEBHOOK_CERT_DIR".into(), certs.display().to_string()),
        ],
        clear_env: false,
        dir: None,
    }
}
