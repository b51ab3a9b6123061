//! Runs a [`Test`] as a scenario body: [`run_test`] executes its steps against the cell
//! through the scenario's [`Ctx`], in the scenario's namespace (`$namespace`). Asserts and
//! errors poll until their tree matches (or no longer does) within their timeout and, when
//! it runs out, name the path and the last value observed. The first failed operation ends
//! its step; the step's and the test's catch operations then collect what they show into the
//! failure, finally operations always run, and cleanup operations run at the end of the test,
//! last registered first.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams, PostParams,
    PropagationPolicy,
};
use serde_json::{Value, json};

use super::jp::{Bindings, ClusterHandle, ClusterReads};
use super::model::{
    Binding, DeleteTarget, Expect, ObjectRef, Op, OpKind, Resources, Test, Timeouts, WaitFor,
    timeout_of,
};
use super::tree::{self, Assertion, Mismatch};
use crate::scenario::record::{Sent, Verb};
use crate::scenario::{Ctx, pinned};

/// How long a kind may take to be served (a CRD the test just created).
const DISCOVERY: Duration = Duration::from_secs(10);

/// How often asserts, errors and waits look again.
const POLL: Duration = Duration::from_millis(250);

/// Runs `test` in `ctx`; the error says which step and operation failed and why, followed by
/// what the catch operations collected.
pub async fn run_test(test: &Test, ctx: &Ctx) -> anyhow::Result<()> {
    let mut ns_created = false;
    let namespace = match &test.namespace {
        Some(ns) => {
            ns_created = ensure_namespace(ctx, ns).await?;
            ns.clone()
        }
        None => ctx.namespace.clone(),
    };
    let cluster = ClusterHandle::new(std::sync::Arc::new(KubeReads {
        client: ctx.client.clone(),
    }));
    let runner = Runner {
        ctx,
        test,
        namespace: namespace.clone(),
        cluster,
    };
    let result = runner.steps().await;
    if ns_created {
        let api: Api<Namespace> = Api::all(ctx.client.clone());
        let _ = api.delete(&namespace, &DeleteParams::background()).await;
    }
    result
}

/// Creates namespace `ns` unless it exists; whether it created it.
async fn ensure_namespace(ctx: &Ctx, ns: &str) -> anyhow::Result<bool> {
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    if api.get_opt(ns).await?.is_some() {
        return Ok(false);
    }
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    api.create(&PostParams::default(), &n)
        .await
        .with_context(|| format!("create namespace {ns}"))?;
    Ok(true)
}

struct Runner<'a> {
    ctx: &'a Ctx,
    test: &'a Test,
    namespace: String,
    /// What `$client` and `$config` stand for in the cluster functions.
    cluster: ClusterHandle,
}

/// The cluster functions' reads, through the scenario's client. Expressions are evaluated in
/// plain code, so each read blocks its worker thread (`block_in_place`: the runtime moves its
/// other tasks away meanwhile).
struct KubeReads {
    client: kube::Client,
}

/// Runs `f` to completion from plain code inside the multi-threaded runtime.
fn block<T>(f: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| h.block_on(f))
        }
        _ => Err("cluster functions need the harness's multi-threaded runtime".into()),
    }
}

impl KubeReads {
    async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<Option<Api<DynamicObject>>, String> {
        let (ar, caps) = match pinned(&self.client, api_version, kind).await {
            Ok(found) => found,
            Err(kube::Error::Discovery(_)) => return Ok(None),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
            Err(e) => return Err(format!("discover {kind} in {api_version}: {e}")),
        };
        Ok(Some(match caps.scope {
            kube::discovery::Scope::Namespaced if !namespace.is_empty() => {
                Api::namespaced_with(self.client.clone(), namespace, &ar)
            }
            _ => Api::all_with(self.client.clone(), &ar),
        }))
    }

    async fn served(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<Api<DynamicObject>, String> {
        self.api(api_version, kind, namespace)
            .await?
            .ok_or_else(|| format!("the cluster serves no {kind} in {api_version}"))
    }
}

impl ClusterReads for KubeReads {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, String> {
        block(async {
            let api = self.served(api_version, kind, namespace).await?;
            match api.get_opt(name).await {
                Ok(o) => o
                    .map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
                    .transpose(),
                Err(e) => Err(format!("get {kind} {name}: {e}")),
            }
        })
    }

    fn list(&self, api_version: &str, kind: &str, namespace: &str) -> Result<Value, String> {
        block(async {
            let api = self.served(api_version, kind, namespace).await?;
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("list {kind}: {e}"))?;
            let items = list
                .items
                .into_iter()
                .map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(json!({
                "apiVersion": api_version,
                "kind": format!("{kind}List"),
                "metadata": list.metadata,
                "items": items,
            }))
        })
    }

    fn resource_exists(&self, api_version: &str, kind: &str) -> Result<bool, String> {
        block(async { Ok(self.api(api_version, kind, "").await?.is_some()) })
    }

    fn server_version(&self) -> Result<Value, String> {
        block(async {
            let info = self
                .client
                .apiserver_version()
                .await
                .map_err(|e| format!("read /version: {e}"))?;
            serde_json::to_value(info).map_err(|e| e.to_string())
        })
    }
}

/// What an operation leaves for the ones after it, and what a collector shows.
#[derive(Default)]
struct Done {
    /// Bindings for the operation's outputs (`$stdout`, `$stderr`, `$error` of scripts).
    results: Bindings,
    /// Text for the report (catch/finally collectors, script output).
    shown: String,
    /// The objects it wrote, as the apiserver returned them (`@` of its outputs).
    objects: Vec<Value>,
}

impl Runner<'_> {
    fn base_bindings(&self) -> Bindings {
        let mut b = Bindings::new();
        b.insert("namespace".into(), json!(self.namespace));
        b.insert("client".into(), self.cluster.value());
        b.insert("config".into(), self.cluster.value());
        b.insert("test".into(), json!({"metadata": {"name": self.test.name}}));
        b.insert("values".into(), json!({}));
        b
    }

    async fn steps(&self) -> anyhow::Result<()> {
        let mut bindings = self.base_bindings();
        bind_all(&mut bindings, &self.test.bindings, "spec.bindings")?;
        let mut cleanups: Vec<(&Op, Bindings, Timeouts)> = vec![];
        let mut failure: Option<String> = None;
        for step in &self.test.steps {
            let mut b = bindings.clone();
            b.insert("step".into(), json!({"name": step.name}));
            bind_all(&mut b, &step.bindings, &format!("{} bindings", step.name))?;
            for op in &step.try_ {
                match self.op(op, &mut b, &step.timeouts).await {
                    Ok(_) => {}
                    Err(e) => {
                        failure = Some(format!("{}: {e:#}", op.at));
                        break;
                    }
                }
            }
            if let Some(f) = failure.as_mut() {
                for op in step.catch.iter().chain(&self.test.catch) {
                    match self.op(op, &mut b.clone(), &step.timeouts).await {
                        Ok(d) if !d.shown.is_empty() => {
                            f.push_str(&format!("\n{}:\n{}", op.at, d.shown.trim_end()))
                        }
                        Ok(_) => {}
                        Err(e) => f.push_str(&format!("\n{}: {e:#}", op.at)),
                    }
                }
            }
            for op in &step.finally {
                if let Err(e) = self.op(op, &mut b.clone(), &step.timeouts).await {
                    let line = format!("{}: {e:#}", op.at);
                    match failure.as_mut() {
                        Some(f) => f.push_str(&format!("\n{line}")),
                        None => failure = Some(line),
                    }
                }
            }
            cleanups.extend(step.cleanup.iter().map(|op| (op, b.clone(), step.timeouts)));
            if failure.is_some() {
                break;
            }
        }
        for (op, mut b, t) in cleanups.into_iter().rev() {
            if let Err(e) = self.op(op, &mut b, &t).await {
                let line = format!("{}: {e:#}", op.at);
                match failure.as_mut() {
                    Some(f) => f.push_str(&format!("\n{line}")),
                    None => failure = Some(line),
                }
            }
        }
        match failure {
            Some(f) => Err(anyhow!(f)),
            None => Ok(()),
        }
    }

    /// Runs one operation; its outputs are bound in `bindings` for the rest of the step.
    async fn op(&self, op: &Op, bindings: &mut Bindings, t: &Timeouts) -> anyhow::Result<Done> {
        let mut b = bindings.clone();
        bind_all(&mut b, &op.bindings, &format!("{} bindings", op.at))?;
        let timeout = timeout_of(op, t);
        let templated = op.template.unwrap_or(self.test.template);
        let done = match &op.kind {
            OpKind::Apply(r, e) => self.write(Write::Apply, r, e, &b, templated).await?,
            OpKind::Create(r, e) => self.write(Write::Create, r, e, &b, templated).await?,
            OpKind::Patch(r, e) => self.write(Write::Patch, r, e, &b, templated).await?,
            OpKind::Update(r, e) => self.write(Write::Update, r, e, &b, templated).await?,
            OpKind::Delete(target, e) => self.delete(target, e, &b, timeout, templated).await?,
            OpKind::Assert(r) => {
                for expected in self.load(r)? {
                    self.assert(&expected, &b, timeout).await?;
                }
                Done::default()
            }
            OpKind::Error(r) => {
                for expected in self.load(r)? {
                    self.error(&expected, &b, timeout).await?;
                }
                Done::default()
            }
            OpKind::Wait(r, f) => {
                self.wait(r, f, &b, timeout).await?;
                Done::default()
            }
            OpKind::Sleep(d) => {
                tokio::time::sleep(*d).await;
                Done::default()
            }
            OpKind::Script {
                content,
                env,
                check,
            } => {
                let mut cmd = tokio::process::Command::new("sh");
                cmd.arg("-c").arg(content);
                self.exec(cmd, env, check.as_ref(), &b, timeout).await?
            }
            OpKind::Command { args, env, check } => {
                let kubectl = self.kubectl()?;
                let mut cmd = tokio::process::Command::new(kubectl);
                // chainsaw expands environment variables in a command's arguments.
                let mut vars = vec![("NAMESPACE".to_string(), self.namespace.clone())];
                for e in env {
                    let v = tree::template(&e.value, &b)?;
                    vars.push((
                        e.name.clone(),
                        v.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string()),
                    ));
                }
                cmd.args(args.iter().map(|a| expand(a, &vars)));
                self.exec(cmd, env, check.as_ref(), &b, timeout).await?
            }
            OpKind::Events(r) => Done {
                shown: self.events(r).await?,
                ..Done::default()
            },
            OpKind::Describe(r) => Done {
                shown: self.describe(r).await?,
                ..Done::default()
            },
            OpKind::PodLogs(r) => Done {
                shown: self.pod_logs(r).await?,
                ..Done::default()
            },
        };
        let mut with_results = b.clone();
        with_results.extend(done.results.clone());
        for o in &op.outputs {
            // Evaluated for each object the operation wrote (`$operation.resourceId` counts them
            // from 1) that `match` selects, or once over nothing for scripts.
            let mut currents: Vec<(usize, Value)> = if done.objects.is_empty() {
                vec![(1, Value::Null)]
            } else {
                done.objects
                    .iter()
                    .cloned()
                    .enumerate()
                    .map(|(i, v)| (i + 1, v))
                    .collect()
            };
            if let Some(m) = &o.matches {
                let mut kept = vec![];
                for (i, obj) in currents {
                    if tree::check(m, &obj, &with_results)?.is_empty() {
                        kept.push((i, obj));
                    }
                }
                currents = kept;
            }
            for (id, current) in currents {
                let mut scope = with_results.clone();
                scope.extend(bindings.clone());
                scope.insert("operation".into(), json!({"resourceId": id}));
                let name = evaluated_name(&o.name, &scope)?;
                let v = match o.value.as_str().and_then(super::jp::as_expression) {
                    Some(expr) => super::jp::eval(expr, &current, &scope)?,
                    None => tree::template(&o.value, &scope)?,
                };
                bindings.insert(name, v);
            }
        }
        Ok(done)
    }

    /// The objects of `r`: inline, or the documents of a file of the test's directory.
    fn load(&self, r: &Resources) -> anyhow::Result<Vec<Value>> {
        match r {
            Resources::Inline(v) => Ok(vec![v.clone()]),
            Resources::File(f) => {
                let dir = self.test.dir.as_deref().with_context(|| {
                    format!("`file: {f}` needs the test's directory; embedded tests give resources inline")
                })?;
                let path = dir.join(f);
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("read {}", path.display()))?;
                let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
                    .map_err(|e| anyhow!("parse {}: {e}", path.display()))?;
                Ok(docs
                    .into_iter()
                    .filter(|d| !d.is_null())
                    .flat_map(|d| match (d["kind"].as_str(), d["items"].as_array()) {
                        (Some("List"), Some(items)) => items.clone(),
                        _ => vec![d],
                    })
                    .collect())
            }
        }
    }

    /// The API of `api_version`/`kind` in `namespace` (or the test's), and whether it is
    /// namespaced.
    async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> anyhow::Result<(Api<DynamicObject>, bool)> {
        // A kind a CRD of the test just created takes a moment to be served.
        let deadline = tokio::time::Instant::now() + DISCOVERY;
        let (ar, caps) = loop {
            match pinned(&self.ctx.client, api_version, kind).await {
                Ok(found) => break found,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(anyhow::Error::new(e)
                        .context(format!("the cluster serves no {kind} in {api_version}")));
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        };
        Ok(match caps.scope {
            kube::discovery::Scope::Namespaced => (
                Api::namespaced_with(
                    self.ctx.client.clone(),
                    namespace.unwrap_or(&self.namespace),
                    &ar,
                ),
                true,
            ),
            kube::discovery::Scope::Cluster => (Api::all_with(self.ctx.client.clone(), &ar), false),
        })
    }

    async fn write(
        &self,
        how: Write,
        r: &Resources,
        expects: &[Expect],
        b: &Bindings,
        templated: bool,
    ) -> anyhow::Result<Done> {
        let mut done = Done::default();
        for raw in self.load(r)? {
            let mut obj = if templated {
                tree::template(&raw, b)?
            } else {
                raw
            };
            let (api_version, kind) = (text(&obj, "apiVersion"), text(&obj, "kind"));
            let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
            let (api, namespaced) = self.api(&api_version, &kind, ns.as_deref()).await?;
            if namespaced && ns.is_none() {
                obj["metadata"]["namespace"] = json!(self.namespace);
            }
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let what = format!("{kind} {name}");
            let result = self.send(how, &api, &obj, &name, namespaced).await;
            let outcome = match &result {
                Ok(o) => serde_json::to_value(o).unwrap_or(Value::Null),
                Err(_) => obj.clone(),
            };
            let error = result.as_ref().err().map(error_text);
            expect(expects, &outcome, error, b)
                .with_context(|| format!("{} {what}", how.verb()))?;
            done.objects.push(outcome);
        }
        Ok(done)
    }

    /// Creates `o` refusing unknown fields, as kubectl does (`fieldValidation=Strict`).
    async fn create_strict(&self, obj: &Value, o: &DynamicObject) -> anyhow::Result<DynamicObject> {
        let (api_version, kind) = (text(obj, "apiVersion"), text(obj, "kind"));
        let (ar, caps) = pinned(&self.ctx.client, &api_version, &kind).await?;
        let ns = match caps.scope {
            kube::discovery::Scope::Namespaced => obj["metadata"]["namespace"].as_str(),
            kube::discovery::Scope::Cluster => None,
        };
        use kube::Resource;
        let url = DynamicObject::url_path(&ar, ns);
        let mut req = kube::core::Request::new(url)
            .create(&PostParams::default(), serde_json::to_vec(o)?)
            .map_err(kube::Error::BuildRequest)?;
        let uri = format!("{}?fieldValidation=Strict", req.uri().path());
        *req.uri_mut() = uri.parse()?;
        Ok(self.ctx.client.request::<DynamicObject>(req).await?)
    }

    async fn send(
        &self,
        how: Write,
        api: &Api<DynamicObject>,
        obj: &Value,
        name: &str,
        namespaced: bool,
    ) -> anyhow::Result<DynamicObject> {
        let (api_version, kind) = (text(obj, "apiVersion"), text(obj, "kind"));
        let record = |verb| {
            self.ctx
                .recorder
                .record(Sent::of_object(&api_version, &kind, verb, obj))
        };
        let exists = match how {
            Write::Apply => api.get_opt(name).await?.is_some(),
            _ => false,
        };
        let created = match (how, exists) {
            (Write::Create, _) | (Write::Apply, false) => {
                record(Verb::Create);
                let o: DynamicObject = serde_json::from_value(obj.clone())?;
                let created = self.create_strict(obj, &o).await?;
                if !namespaced {
                    self.ctx.cleanup.push(api.clone(), name);
                }
                created
            }
            (Write::Apply, true) | (Write::Patch, _) => {
                record(Verb::MergePatch);
                let pp = PatchParams {
                    field_validation: Some(kube::api::ValidationDirective::Strict),
                    ..PatchParams::default()
                };
                api.patch(name, &pp, &Patch::Merge(obj)).await?
            }
            (Write::Update, _) => {
                record(Verb::Replace);
                let mut obj = obj.clone();
                if obj["metadata"]["resourceVersion"].is_null() {
                    let current = api.get(name).await?;
                    obj["metadata"]["resourceVersion"] = json!(current.metadata.resource_version);
                }
                let o: DynamicObject = serde_json::from_value(obj)?;
                api.replace(name, &PostParams::default(), &o).await?
            }
        };
        Ok(created)
    }

    /// The candidates an expected tree is matched against: the named object, or those its
    /// labels select.
    async fn candidates(
        &self,
        expected: &Value,
        b: &Bindings,
    ) -> anyhow::Result<(String, Vec<DynamicObject>)> {
        let id = tree::identity(expected, b)?;
        if !id.is_resource() {
            bail!("an assertion tree needs apiVersion and kind");
        }
        let (api, _) = self
            .api(&id.api_version, &id.kind, id.namespace.as_deref())
            .await?;
        let what = format!(
            "{} {}",
            id.kind,
            id.name.clone().unwrap_or_else(|| "(any)".into())
        );
        let objects: Vec<DynamicObject> = match &id.name {
            Some(n) => api.get_opt(n).await?.into_iter().collect(),
            None => {
                let sel: Vec<String> = id.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                api.list(&ListParams::default().labels(&sel.join(",")))
                    .await?
                    .items
            }
        };
        // Items of a list come without apiVersion and kind; trees usually name both.
        let types = kube::api::TypeMeta {
            api_version: id.api_version.clone(),
            kind: id.kind.clone(),
        };
        let objects = objects
            .into_iter()
            .map(|mut o| {
                o.types.get_or_insert_with(|| types.clone());
                o
            })
            .collect();
        Ok((what, objects))
    }

    /// Waits until some object matches `expected`.
    async fn assert(
        &self,
        expected: &Value,
        b: &Bindings,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let tree = Assertion::compile(expected)?;
        if !tree::identity(expected, b)?.is_resource() {
            // A tree over no object (bindings only): checked once against null.
            let m = tree.check(&Value::Null, b)?;
            if m.is_empty() {
                return Ok(());
            }
            bail!(
                "assert: {}",
                m.iter()
                    .map(Mismatch::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (what, objects) = self.candidates(expected, b).await?;
            let mut best: Option<Vec<Mismatch>> = None;
            for o in &objects {
                let actual = serde_json::to_value(o)?;
                let m = tree.check(&actual, b)?;
                if m.is_empty() {
                    return Ok(());
                }
                if best.as_ref().is_none_or(|b| m.len() < b.len()) {
                    best = Some(m);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(match best {
                    None => anyhow!("assert {what}: not found within {timeout:?}"),
                    Some(m) => anyhow!(
                        "assert {what}: no match within {timeout:?}: {}",
                        m.iter()
                            .map(Mismatch::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until no object matches `expected`.
    async fn error(&self, expected: &Value, b: &Bindings, timeout: Duration) -> anyhow::Result<()> {
        let tree = Assertion::compile(expected)?;
        if !tree::identity(expected, b)?.is_resource() {
            if tree.check(&Value::Null, b)?.is_empty() {
                bail!("error: the tree matches");
            }
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (what, objects) = self.candidates(expected, b).await?;
            let mut matching = None;
            for o in &objects {
                if tree.check(&serde_json::to_value(o)?, b)?.is_empty() {
                    matching = Some(o.metadata.name.clone().unwrap_or_default());
                    break;
                }
            }
            let Some(name) = matching else { return Ok(()) };
            if tokio::time::Instant::now() >= deadline {
                bail!("error {what}: {name} still matches after {timeout:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The objects `r` refers to, with their API.
    async fn referred(
        &self,
        r: &ObjectRef,
        b: &Bindings,
    ) -> anyhow::Result<(Api<DynamicObject>, Vec<DynamicObject>)> {
        let t = |s: &str| -> anyhow::Result<String> {
            Ok(tree::template(&json!(s), b)?
                .as_str()
                .map(str::to_string)
                .unwrap_or_default())
        };
        let ns = r.namespace.as_deref().map(t).transpose()?;
        let (api, _) = self
            .api(&t(&r.api_version)?, &t(&r.kind)?, ns.as_deref())
            .await?;
        let objects = match &r.name {
            Some(n) => api.get_opt(&t(n)?).await?.into_iter().collect(),
            None => {
                let lp = match &r.selector {
                    Some(s) => ListParams::default().labels(&t(s)?),
                    None => ListParams::default(),
                };
                api.list(&lp).await?.items
            }
        };
        Ok((api, objects))
    }

    async fn delete(
        &self,
        target: &DeleteTarget,
        expects: &[Expect],
        b: &Bindings,
        timeout: Duration,
        templated: bool,
    ) -> anyhow::Result<Done> {
        let mut gone: Vec<(Api<DynamicObject>, String)> = vec![];
        let targets: Vec<(Api<DynamicObject>, Vec<DynamicObject>, Value)> = match target {
            DeleteTarget::Ref(r) => {
                let (api, objs) = self.referred(r, b).await?;
                let v = json!({"apiVersion": r.api_version, "kind": r.kind});
                vec![(api, objs, v)]
            }
            DeleteTarget::Resources(res) => {
                let mut v = vec![];
                for raw in self.load(res)? {
                    let obj = if templated {
                        tree::template(&raw, b)?
                    } else {
                        raw
                    };
                    let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
                    let (api, _) = self
                        .api(
                            &text(&obj, "apiVersion"),
                            &text(&obj, "kind"),
                            ns.as_deref(),
                        )
                        .await?;
                    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                    let objs = api.get_opt(name).await?.into_iter().collect();
                    v.push((api, objs, obj));
                }
                v
            }
        };
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        for (api, objs, described) in targets {
            if objs.is_empty() && !expects.is_empty() {
                // Nothing to delete is no failure (as in chainsaw) unless expectations judge it.
                let error = Some(format!("{} not found", text(&described, "kind")));
                expect(expects, &described, error, b)?;
            }
            for o in objs {
                let name = o.metadata.name.clone().unwrap_or_default();
                let result = api.delete(&name, &dp).await;
                let error = result.as_ref().err().map(|e| e.to_string());
                let actual = serde_json::to_value(&o)?;
                expect(expects, &actual, error.clone(), b)
                    .with_context(|| format!("delete {name}"))?;
                if error.is_none() {
                    gone.push((api.clone(), name));
                }
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        for (api, name) in gone {
            while api.get_opt(&name).await?.is_some() {
                if tokio::time::Instant::now() >= deadline {
                    bail!("delete {name}: still there after {timeout:?}");
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(Done::default())
    }

    async fn wait(
        &self,
        r: &ObjectRef,
        f: &WaitFor,
        b: &Bindings,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (_, objs) = self.referred(r, b).await?;
            let (ok, last) = match f {
                WaitFor::Deletion => (objs.is_empty(), format!("{} left", objs.len())),
                WaitFor::Condition { name, value } => {
                    let status = |o: &DynamicObject| {
                        o.data["status"]["conditions"]
                            .as_array()
                            .and_then(|c| c.iter().find(|c| c["type"] == json!(name)))
                            .and_then(|c| c["status"].as_str().map(str::to_string))
                    };
                    let seen: Vec<String> =
                        objs.iter().map(|o| format!("{:?}", status(o))).collect();
                    (
                        !objs.is_empty()
                            && objs
                                .iter()
                                .all(|o| status(o).is_some_and(|s| s.eq_ignore_ascii_case(value))),
                        format!("condition {name}: {}", seen.join(", ")),
                    )
                }
                WaitFor::JsonPath { path, value } => {
                    let seen: Vec<String> = objs
                        .iter()
                        .map(|o| json_path(&serde_json::to_value(o).unwrap_or_default(), path))
                        .collect();
                    (
                        !objs.is_empty() && seen.iter().all(|s| s == value),
                        format!("{path}: {}", seen.join(", ")),
                    )
                }
            };
            if ok {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "wait {} {}: not within {timeout:?} ({last})",
                    r.kind,
                    r.name.as_deref().unwrap_or("")
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn kubectl(&self) -> anyhow::Result<PathBuf> {
        self.ctx.facts.kubectl.clone().context(
            "kubectl is not built for this run (scripts and commands need the toolchain's kubectl)",
        )
    }

    /// Runs a script or kubectl with the cell's kubeconfig and the test's namespace; its
    /// outcome is judged by `check` (over `$stdout`, `$stderr`, `$error`), or by its exit code.
    async fn exec(
        &self,
        mut cmd: tokio::process::Command,
        env: &[Binding],
        check: Option<&Value>,
        b: &Bindings,
        timeout: Duration,
    ) -> anyhow::Result<Done> {
        let kubectl = self.kubectl()?;
        let dir = kubectl.parent().unwrap_or(Path::new("/"));
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
        );
        cmd.env("PATH", path)
            .env("NAMESPACE", &self.namespace)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some(k) = &self.ctx.facts.kubeconfig {
            cmd.env("KUBECONFIG", k);
        }
        if let Some(d) = &self.test.dir {
            cmd.current_dir(d);
        }
        for e in env {
            let v = tree::template(&e.value, b)?;
            cmd.env(
                &e.name,
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            );
        }
        let (stdout, stderr, error) = match tokio::time::timeout(timeout, cmd.output()).await {
            Ok(out) => {
                let out = out.context("start the script")?;
                (
                    String::from_utf8_lossy(&out.stdout).to_string(),
                    String::from_utf8_lossy(&out.stderr).to_string(),
                    (!out.status.success()).then(|| format!("{}", out.status)),
                )
            }
            // Killed (kill_on_drop): a timeout is the script's error, for checks to judge.
            Err(_) => (
                String::new(),
                String::new(),
                Some(format!("did not finish within {timeout:?}")),
            ),
        };
        let mut results = Bindings::new();
        results.insert("stdout".into(), json!(stdout));
        results.insert("stderr".into(), json!(stderr));
        results.insert("error".into(), json!(error));
        match check {
            Some(c) => {
                let mut all = b.clone();
                all.extend(results.clone());
                let m = tree::check(c, &Value::Null, &all)?;
                if !m.is_empty() {
                    bail!(
                        "check failed: {} (stdout: {:?}, stderr: {:?})",
                        m.iter()
                            .map(Mismatch::to_string)
                            .collect::<Vec<_>>()
                            .join("; "),
                        stdout.trim_end(),
                        stderr.trim_end()
                    );
                }
            }
            None => {
                if let Some(e) = &error {
                    bail!("{e}: {}", stderr.trim_end());
                }
            }
        }
        Ok(Done {
            results,
            shown: stdout,
            objects: vec![],
        })
    }

    async fn events(&self, r: &ObjectRef) -> anyhow::Result<String> {
        let ns = r.namespace.as_deref().unwrap_or(&self.namespace);
        let api: Api<Event> = Api::namespaced(self.ctx.client.clone(), ns);
        let mut list = api.list(&ListParams::default()).await?.items;
        list.sort_by_key(|e| e.metadata.creation_timestamp.clone());
        Ok(list
            .iter()
            .filter(|e| {
                r.name
                    .as_deref()
                    .is_none_or(|n| e.involved_object.name.as_deref() == Some(n))
            })
            .map(|e| {
                format!(
                    "{} {} {}/{}: {}",
                    e.type_.as_deref().unwrap_or(""),
                    e.reason.as_deref().unwrap_or(""),
                    e.involved_object.kind.as_deref().unwrap_or(""),
                    e.involved_object.name.as_deref().unwrap_or(""),
                    e.message.as_deref().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("\n"))
    }

    async fn describe(&self, r: &ObjectRef) -> anyhow::Result<String> {
        let (_, objs) = self.referred(r, &self.base_bindings()).await?;
        Ok(objs
            .iter()
            .map(|o| serde_saphyr::to_string(o).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("---\n"))
    }

    async fn pod_logs(&self, r: &ObjectRef) -> anyhow::Result<String> {
        let ns = r.namespace.as_deref().unwrap_or(&self.namespace);
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), ns);
        let pods = match &r.name {
            Some(n) => api.get_opt(n).await?.into_iter().collect(),
            None => {
                let lp = match &r.selector {
                    Some(s) => ListParams::default().labels(s),
                    None => ListParams::default(),
                };
                api.list(&lp).await?.items
            }
        };
        let mut out = String::new();
        for p in pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let lp = LogParams {
                container: r.container.clone(),
                ..LogParams::default()
            };
            match api.logs(&name, &lp).await {
                Ok(l) => out.push_str(&format!("{name}:\n{l}\n")),
                Err(e) => out.push_str(&format!("{name}: no logs: {e}\n")),
            }
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Copy)]
enum Write {
    Apply,
    Create,
    Patch,
    Update,
}

impl Write {
    fn verb(self) -> &'static str {
        match self {
            Write::Apply => "apply",
            Write::Create => "create",
            Write::Patch => "patch",
            Write::Update => "update",
        }
    }
}

/// An error as `$error` shows it: the apiserver's message for API errors.
fn error_text(e: &anyhow::Error) -> String {
    match e.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => status.message.clone(),
        _ => format!("{e:#}"),
    }
}

/// `$NAME` and `${NAME}` in `s` replaced from `env` (unknown names are left as they are).
fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = s.to_string();
    let mut sorted: Vec<&(String, String)> = env.iter().collect();
    sorted.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    for (k, v) in sorted {
        out = out
            .replace(&format!("${{{k}}}"), v)
            .replace(&format!("${k}"), v);
    }
    out
}

fn text(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

/// Evaluates each binding in order (later ones see earlier ones).
fn bind_all(bindings: &mut Bindings, list: &[Binding], at: &str) -> anyhow::Result<()> {
    for b in list {
        let v = tree::template(&b.value, bindings).with_context(|| format!("{at}: {}", b.name))?;
        let name = evaluated_name(&b.name, bindings)?;
        bindings.insert(name, v);
    }
    Ok(())
}

/// A binding's name, which may itself be an expression (`($prefix)`).
fn evaluated_name(name: &str, bindings: &Bindings) -> anyhow::Result<String> {
    Ok(match super::jp::as_expression(name) {
        Some(expr) => match super::jp::eval(expr, &Value::Null, bindings)? {
            Value::String(s) => s,
            other => other.to_string(),
        },
        None => name.to_string(),
    })
}

/// Judges an operation's outcome by its expectations: the first whose `match` fits the
/// object must have its `check` hold with `$error` bound; with none, an error fails.
fn expect(
    expects: &[Expect],
    actual: &Value,
    error: Option<String>,
    b: &Bindings,
) -> anyhow::Result<()> {
    let mut all = b.clone();
    all.insert("error".into(), json!(error));
    for e in expects {
        if let Some(m) = &e.matches
            && !tree::check(m, actual, &all)?.is_empty()
        {
            continue;
        }
        let m = tree::check(&e.check, actual, &all)?;
        if m.is_empty() {
            return Ok(());
        }
        bail!(
            "expectation failed: {}{}",
            m.iter()
                .map(Mismatch::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            error.map(|e| format!(" (error: {e})")).unwrap_or_default()
        );
    }
    match error {
        Some(e) => Err(anyhow!(e)),
        None => Ok(()),
    }
}

/// A kubectl-style JSONPath of plain fields (`{.status.phase}`, `.metadata.labels.app`) as text.
fn json_path(v: &Value, path: &str) -> String {
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut cur = v;
    for part in p.split('.').filter(|s| !s.is_empty()) {
        cur = match (part.strip_suffix(']'), cur) {
            (Some(ix), Value::Object(_)) if part.contains('[') => {
                let (field, i) = ix.split_once('[').unwrap_or((ix, "0"));
                &cur[field][i.parse::<usize>().unwrap_or(0)]
            }
            _ => &cur[part],
        };
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_arguments_expand_variables() {
        let env = vec![
            ("NAMESPACE".to_string(), "ns-1".to_string()),
            ("NAME".to_string(), "x".to_string()),
        ];
        assert_eq!(expand("-n=$NAMESPACE", &env), "-n=ns-1");
        assert_eq!(expand("${NAME}-$NAME", &env), "x-x");
        assert_eq!(expand("$OTHER", &env), "$OTHER");
    }

    #[test]
    fn json_paths_read_plain_fields() {
        let v = json!({"status": {"phase": "Running", "n": 3, "c": [{"t": "x"}]}});
        assert_eq!(json_path(&v, "{.status.phase}"), "Running");
        assert_eq!(json_path(&v, ".status.n"), "3");
        assert_eq!(json_path(&v, "{.status.c[0].t}"), "x");
        assert_eq!(json_path(&v, "{.status.missing}"), "");
    }

    #[test]
    fn expectations_judge_errors() {
        let b = Bindings::new();
        let refused = vec![Expect {
            matches: None,
            check: json!({"($error != null)": true}),
        }];
        assert!(expect(&refused, &json!({}), Some("denied".into()), &b).is_ok());
        let e = expect(&refused, &json!({}), None, &b).unwrap_err();
        assert!(e.to_string().contains("expectation failed"), "{e}");
        assert!(expect(&[], &json!({}), Some("boom".into()), &b).is_err());
        assert!(expect(&[], &json!({}), None, &b).is_ok());
    }
}
