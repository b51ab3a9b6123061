//! A running local cluster: the methods of [`LocalCluster`], where to start. It spawns, stops
//! and checks its components, injects faults (an apiserver restart, a silenced node), pushes
//! images to its registry, and tears everything down when destroyed or dropped.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};

use super::components::Layout;
use super::state::ClusterState;
use super::{LocalCluster, LocalError, components, get_ok, node_ready, pki, registry};
use crate::cluster::Cluster;
use crate::process::{ComponentSpec, OnReplace, ProcRecord, Process, ProcessError, Supervisor};
use crate::wait::{self, Check};

impl std::fmt::Debug for LocalCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCluster")
            .field("name", &self.state.name)
            .field("dir", &self.layout.dir)
            .finish_non_exhaustive()
    }
}

impl LocalCluster {
    pub(super) fn save(&self) -> Result<(), LocalError> {
        let replaced = self.replaced.lock().expect("not poisoned");
        if replaced.is_empty() {
            return self.state.save(&self.layout.state());
        }
        let mut state = self.state.clone();
        for r in state.processes.iter_mut() {
            while let Some((_, new)) = replaced.iter().find(|(old, _)| old == r) {
                *r = new.clone();
            }
        }
        state.save(&self.layout.state())
    }

    pub(super) fn spawn(&mut self, spec: &ComponentSpec) -> Result<(), LocalError> {
        self.spawn_component(spec).map(|_| ())
    }

    /// Starts one more process as part of the cluster (e.g. a controller manager): its log goes
    /// to `logs/<name>.log`, it is recorded in the cluster state, watched by
    /// [`check_alive`](Self::check_alive) and ended with the cluster.
    pub fn spawn_component(&mut self, spec: &ComponentSpec) -> Result<ProcRecord, LocalError> {
        let p = Process::spawn(spec, &self.layout.log(&spec.name))?;
        let record = p.record().clone();
        self.state.processes.push(record.clone());
        self.procs.lock().expect("not poisoned").push(p);
        self.save()?;
        Ok(record)
    }

    /// [`spawn_component`](Self::spawn_component), and a [`Supervisor`] that starts it
    /// again when it exits (as a kubelet restarts a pod's container).
    pub fn spawn_supervised(&mut self, spec: &ComponentSpec) -> Result<Supervisor, LocalError> {
        let record = self.spawn_component(spec)?;
        let replaced = self.replaced.clone();
        let state = self.layout.state();
        let on_replace: OnReplace = Arc::new(move |old, new| {
            replaced
                .lock()
                .expect("not poisoned")
                .push((old.clone(), new.clone()));
            if let Ok(mut s) = ClusterState::load(&state) {
                for r in s.processes.iter_mut().filter(|r| **r == *old) {
                    *r = new.clone();
                }
                s.save(&state).map_err(ProcessError::record)?;
            }
            Ok(())
        });
        Ok(Supervisor::new(
            spec.clone(),
            self.layout.log(&spec.name),
            self.procs.clone(),
            on_replace,
            record,
        ))
    }

    /// Ends one process started by [`spawn_component`](Self::spawn_component) and forgets it
    /// (for tests that stop a component on purpose, use [`ProcRecord::terminate`] instead).
    pub fn stop_component(&mut self, name: &str) -> Result<(), LocalError> {
        let mut procs = self.procs.lock().expect("not poisoned");
        for p in procs.iter_mut().filter(|p| p.name == name) {
            p.stop(Duration::from_secs(5));
        }
        procs.retain(|p| p.name != name);
        drop(procs);
        self.state.processes.retain(|p| p.name != name);
        self.save()
    }

    /// The apiserver URL.
    pub fn server(&self) -> &str {
        &self.state.server
    }

    /// The cluster CA certificate (PEM).
    pub fn ca_pem(&self) -> Result<String, LocalError> {
        pki::Pki::at(&self.layout.pki()).ca_pem()
    }

    /// The first component that has exited, as an error with its log tail.
    pub fn check_alive(&self) -> Result<(), LocalError> {
        let mut procs = self.procs.lock().expect("not poisoned");
        for p in procs.iter_mut() {
            if let Some(status) = p.exited() {
                return Err(LocalError::Exited {
                    component: p.name.clone(),
                    status,
                    log: p.log.clone(),
                    tail: p.log_tail(20),
                });
            }
        }
        Ok(())
    }

    /// Kills kube-apiserver at once (a crash) and starts it again with the same flags, etcd
    /// and certificates, as a static pod's restart would: every client's watches end and its
    /// requests fail until the new one serves. Returns once `/readyz` answers again, with how
    /// long it took; `None` for a cluster taken over with [`LocalProvider::attach`] (this
    /// handle did not start it, so nothing would start it again).
    pub async fn restart_apiserver(&self) -> Result<Option<Duration>, LocalError> {
        let Some(supervisor) = &self.apiserver else {
            return Ok(None);
        };
        let started = Instant::now();
        supervisor.current().kill();
        // A killed Go process is a zombie while its other threads exit: started again once
        // it has been reaped.
        let deadline = Instant::now() + Duration::from_secs(10);
        while supervisor.revive()?.is_none() {
            if Instant::now() > deadline {
                return Err(LocalError::NotReady {
                    what: "kube-apiserver to end after it was killed".into(),
                    timeout: Duration::from_secs(10),
                    last: format!("pid {} still running", supervisor.current().pid),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let client = self.client();
        self.wait_until(
            "kube-apiserver /readyz after its restart",
            Duration::from_secs(120),
            || {
                let client = client.clone();
                async move { get_ok(&client, "/readyz").await }
            },
        )
        .await?;
        Ok(Some(started.elapsed()))
    }

    /// Makes node `name`'s kubelet go silent, as a node that lost power or its network: kwok
    /// stops playing its kubelet (the node loses kwok's label), so its lease is no longer
    /// renewed and, once the grace period of the node controller of kube-controller-manager
    /// has passed (50 s by default), that controller marks it NotReady, taints it and marks
    /// its pods not ready. Returns once the node is NotReady, with how long that took; `None`
    /// when it is not a kwok node (a real node's kubelet is left alone).
    /// [`resume_node`](Self::resume_node) brings it back.
    pub async fn silence_node(&self, name: &str) -> Result<Option<Duration>, LocalError> {
        let nodes: Api<Node> = Api::all(self.client());
        let node = nodes
            .get(name)
            .await
            .map_err(LocalError::kube(format!("get node {name}")))?;
        let (key, value) = components::KWOK_NODE_LABEL;
        let labels = node.metadata.labels.unwrap_or_default();
        if labels.get(key).map(String::as_str) != Some(value) {
            return Ok(None);
        }
        let started = Instant::now();
        self.kwok_label(name, false).await?;
        let what = format!("node {name} NotReady once its kubelet went silent");
        let r = wait::until(
            &nodes,
            name,
            &what,
            Duration::from_secs(150),
            |node: Option<Node>| {
                Box::pin(std::future::ready(Check::when(
                    !node_ready(node.as_ref()),
                    || "still Ready".into(),
                )))
            },
        )
        .await;
        if let Err(e) = r {
            // Not left silent for the next one.
            let _ = self.resume_node(name).await;
            return Err(e.into());
        }
        Ok(Some(started.elapsed()))
    }

    /// Has kwok play node `name`'s kubelet again after [`silence_node`](Self::silence_node):
    /// returns once the node is Ready.
    pub async fn resume_node(&self, name: &str) -> Result<(), LocalError> {
        self.kwok_label(name, true).await?;
        let nodes: Api<Node> = Api::all(self.client());
        self.wait_node_ready(&nodes, name, Duration::from_secs(120))
            .await
    }

    /// Puts kwok's label on node `name` (kwok plays its kubelet), or takes it off.
    pub(super) async fn kwok_label(&self, name: &str, on: bool) -> Result<(), LocalError> {
        let (key, value) = components::KWOK_NODE_LABEL;
        let patch = serde_json::json!({"metadata": {"labels": {key: on.then_some(value)}}});
        let nodes: Api<Node> = Api::all(self.client());
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(LocalError::kube(format!(
                "set kwok's label on node {name} to {on}"
            )))
    }

    /// Waits until `probe` succeeds (asked every 100 ms), failing at once when a component
    /// exits (with its log) and, on timeout, with the last error the probe saw.
    pub(super) async fn wait_until<F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: F,
    ) -> Result<(), LocalError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        wait::poll(what, timeout, Duration::from_millis(100), || {
            let alive = self.check_alive();
            let probed = probe();
            async move {
                match alive {
                    Err(e) => Check::Failed(e.to_string()),
                    Ok(()) => Check::from_result(probed.await),
                }
            }
        })
        .await
        .map_err(LocalError::from)
    }

    /// Waits until node `name` is Ready (watched), failing at once when a component exits.
    pub(super) async fn wait_node_ready(
        &self,
        nodes: &Api<Node>,
        name: &str,
        timeout: Duration,
    ) -> Result<(), LocalError> {
        let what = format!("node {name} Ready");
        wait::until(nodes, name, &what, timeout, |node: Option<Node>| {
            let alive = self.check_alive().map_err(|e| e.to_string());
            Box::pin(async move {
                if let Err(e) = alive {
                    return Check::Failed(e);
                }
                let conditions: Vec<String> = node
                    .as_ref()
                    .and_then(|n| n.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .map(|cs| {
                        cs.iter()
                            .map(|c| format!("{}={}", c.type_, c.status))
                            .collect()
                    })
                    .unwrap_or_default();
                Check::when(node_ready(node.as_ref()), || match node {
                    None => "no such node".into(),
                    Some(_) => format!("conditions {conditions:?}"),
                })
            })
        })
        .await
        .map(|_| ())
        .map_err(LocalError::from)
    }

    /// An admin client.
    pub fn client(&self) -> kube::Client {
        self.client.clone().expect("a started cluster has a client")
    }

    /// Pushes `images` to the image registry its real nodes pull from (by repository path and
    /// tag, which is how the nodes ask for any host's images); an error when it has no real
    /// node.
    pub async fn push_images(
        &self,
        images: &[crate::toolchain::BuiltImage],
    ) -> Result<(), LocalError> {
        let port = self.state.registry_port.ok_or_else(|| {
            LocalError::Registry(format!(
                "cluster {} has no image registry: only a cluster with real nodes has one",
                self.state.name
            ))
        })?;
        registry::push(images, port, &self.ca_pem()?)
            .await
            .map_err(|e| LocalError::Registry(format!("{e:#}")))
    }

    /// Its directory layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Its recorded state.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// Keep the directory (logs, certificates) after teardown.
    pub fn keep_dir(&mut self, keep: bool) {
        self.keep_dir = keep;
    }

    /// Leaves the cluster running after this process exits; `harness cluster down` ends it.
    pub fn detach(mut self) -> Result<ClusterState, LocalError> {
        if self.owned {
            self.state.owner = None;
        }
        self.save()?;
        self.done = true;
        Ok(self.state.clone())
    }

    pub(super) fn teardown(&mut self) -> Result<(), LocalError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut errors = vec![];
        if !self.owned {
            let mut procs = match self.procs.lock() {
                Ok(p) => p,
                Err(poisoned) => poisoned.into_inner(),
            };
            let mine: Vec<ProcRecord> = procs.iter().map(|p| p.record().clone()).collect();
            for p in procs.iter_mut().rev() {
                p.stop(Duration::from_secs(5));
            }
            // No supervisor starts them again.
            procs.clear();
            drop(procs);
            if let Ok(mut on_disk) = ClusterState::load(&self.layout.state()) {
                on_disk.processes.retain(|p| !mine.contains(p));
                on_disk.save(&self.layout.state())?;
            }
            return Ok(());
        }
        {
            let mut procs = match self.procs.lock() {
                Ok(p) => p,
                Err(poisoned) => poisoned.into_inner(),
            };
            for p in procs.iter_mut().rev() {
                p.stop(Duration::from_secs(5));
                if p.record().alive() {
                    errors.push(format!(
                        "{} (pid {}) is still alive",
                        p.name,
                        p.record().pid
                    ));
                }
            }
            // No supervisor starts them again.
            procs.clear();
        }
        for n in &self.state.real_nodes {
            errors.extend(n.cleanup());
        }
        if !self.keep_dir {
            if let Err(e) = crate::toolchain::cache::make_writable_and_remove(&self.layout.dir) {
                errors.push(format!("remove {}: {e}", self.layout.dir.display()));
            }
        } else {
            self.state.owner = None;
            self.state.processes.clear();
            let _ = self.save();
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(LocalError::Teardown {
                name: self.state.name.clone(),
                errors,
            })
        }
    }
}

impl Cluster for LocalCluster {
    type Error = LocalError;

    fn name(&self) -> &str {
        &self.state.name
    }

    fn kubeconfig(&self) -> &Path {
        &self.state.kubeconfig
    }

    fn export_logs(&self, dest: &Path) -> Result<(), LocalError> {
        std::fs::create_dir_all(dest).map_err(|e| LocalError::io(dest, e))?;
        let logs = self.layout.logs();
        let mut errors = vec![];
        if let Ok(entries) = std::fs::read_dir(&logs) {
            for e in entries.flatten() {
                let to = dest.join(e.file_name());
                if let Err(err) = std::fs::copy(e.path(), &to) {
                    errors.push(format!("copy {}: {err}", e.path().display()));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(LocalError::Teardown {
                name: self.state.name.clone(),
                errors,
            })
        }
    }

    fn destroy(mut self) -> Result<(), LocalError> {
        self.teardown()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("warning: {e}");
        }
    }
}
