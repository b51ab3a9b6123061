//! Named steps of a scenario ([`Steps`], [`crate::scenario::Ctx::step`]): each step's name,
//! when it started and how long it ran are kept for the report, and a failing step's error
//! says which step it was — `step 3, 'lower the partition to 0', after 12.4 s: …` — as Ginkgo's
//! `By` and chainsaw's steps do. Partial-object matching ([`subset`]) compares an expected
//! object with a live one as chainsaw's asserts do, without expressions.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One named step as it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Its name.
    pub name: String,
    /// Seconds into the scenario when it started.
    pub start: f64,
    /// Seconds it ran; `None` while it runs, or if the scenario ended inside it (its timeout).
    pub seconds: Option<f64>,
    /// Whether it failed.
    pub failed: bool,
    /// Which way it passed, when it may pass one of two ways (set by
    /// [`crate::scenario::Ctx::passed_by`]); the report shows it beside the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub way: Option<String>,
}

/// What ends a running step at once, failed: asked every [`TRIPWIRE_EVERY`] while a step
/// runs; `Some(reason)` is the step's error. The runner sets one that trips when the
/// controller panics in the scenario's namespace: a wait for what the controller should do
/// then fails with the cause, not after its timeout.
pub type Tripwire = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// How often a running step asks its [`Tripwire`].
pub const TRIPWIRE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The steps of one scenario so far, shared by the clones of its context.
#[derive(Clone)]
pub struct Steps {
    started: Instant,
    list: Arc<Mutex<Vec<StepRecord>>>,
    tripwire: Option<Tripwire>,
}

impl std::fmt::Debug for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steps")
            .field("list", &self.list)
            .field("tripwire", &self.tripwire.is_some())
            .finish()
    }
}

impl Default for Steps {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            list: Arc::default(),
            tripwire: None,
        }
    }
}

impl Steps {
    /// Steps that end, failed, once `tripwire` says why ([`Tripwire`]).
    pub fn with_tripwire(mut self, tripwire: Tripwire) -> Self {
        self.tripwire = Some(tripwire);
        self
    }

    /// Seconds since the scenario started.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The steps so far, in the order they started.
    pub fn list(&self) -> Vec<StepRecord> {
        self.list.lock().expect("not poisoned").clone()
    }

    /// The step the scenario is in (the last one started and not ended), if any.
    pub fn current(&self) -> Option<(usize, StepRecord)> {
        let list = self.list.lock().expect("not poisoned");
        list.iter()
            .enumerate()
            .rev()
            .find(|(_, s)| s.seconds.is_none())
            .map(|(i, s)| (i + 1, s.clone()))
    }

    /// Records which way the step the scenario is in (else its last step) passed, when it may
    /// pass one of two ways.
    pub fn passed_by(&self, way: &str) {
        let mut list = self.list.lock().expect("not poisoned");
        let at = list
            .iter()
            .rposition(|s| s.seconds.is_none())
            .or(list.len().checked_sub(1));
        if let Some(s) = at.and_then(|i| list.get_mut(i)) {
            s.way = Some(way.to_string());
        }
    }

    /// The ways the steps passed ([`Steps::passed_by`]), as `step: way`, in order.
    pub fn ways(steps: &[StepRecord]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| Some(format!("{}: {}", s.name, s.way.as_deref()?)))
            .collect()
    }

    /// Records steps that ran elsewhere (a chainsaw test's, from its report).
    pub fn extend(&self, steps: impl IntoIterator<Item = StepRecord>) {
        self.list.lock().expect("not poisoned").extend(steps);
    }

    /// Runs `work` as the next step, named `name`; its error, if any, says which step it was
    /// and how long it ran.
    pub async fn run<T>(
        &self,
        name: &str,
        work: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        let start = self.started.elapsed().as_secs_f64();
        let number = {
            let mut list = self.list.lock().expect("not poisoned");
            list.push(StepRecord {
                name: name.to_string(),
                start,
                seconds: None,
                failed: false,
                way: None,
            });
            list.len()
        };
        let result = match &self.tripwire {
            None => work.await,
            Some(tripwire) => {
                let tripped = async {
                    loop {
                        tokio::time::sleep(TRIPWIRE_EVERY).await;
                        if let Some(reason) = tripwire() {
                            return reason;
                        }
                    }
                };
                tokio::select! {
                    r = work => r,
                    reason = tripped => Err(anyhow::anyhow!(reason)),
                }
            }
        };
        let seconds = self.started.elapsed().as_secs_f64() - start;
        if let Some(s) = self.list.lock().expect("not poisoned").get_mut(number - 1) {
            s.seconds = Some(seconds);
            s.failed = result.is_err();
        }
        result.map_err(|e| e.context(format!("step {number}, '{name}', after {seconds:.1} s")))
    }
}

/// Whether `actual` holds `expected`: every key of an expected object present with a value
/// that holds the expected one, lists of the same length element by element, other values
/// equal. The error names the first path that differs, with both values.
pub fn subset(expected: &Value, actual: &Value) -> Result<(), String> {
    fn walk(path: &str, e: &Value, a: &Value) -> Result<(), String> {
        match (e, a) {
            (Value::Object(em), Value::Object(am)) => {
                for (k, ev) in em {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    match am.get(k) {
                        Some(av) => walk(&p, ev, av)?,
                        None if ev.is_null() => {}
                        None => return Err(format!("{p}: expected {ev}, got nothing")),
                    }
                }
                Ok(())
            }
            (Value::Array(ea), Value::Array(aa)) => {
                if ea.len() != aa.len() {
                    return Err(format!(
                        "{path}: expected {} items, got {}",
                        ea.len(),
                        aa.len()
                    ));
                }
                for (i, (ev, av)) in ea.iter().zip(aa).enumerate() {
                    walk(&format!("{path}[{i}]"), ev, av)?;
                }
                Ok(())
            }
            _ if e == a => Ok(()),
            _ => Err(format!("{path}: expected {e}, got {a}")),
        }
    }
    walk("", expected, actual)
}

/// Whether a value is one a serializer may leave out (null, false, 0, empty).
pub fn zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The fields of `want` that `got` does not carry, by path: a key absent (unless its value is
/// a zero one, which may be left out), a scalar that differs, a list item missing (items with
/// a `name` matched by name, others by position). Keys `got` adds (defaults) are no matter.
pub fn lacking(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                match g.get(k) {
                    Some(x) => lacking(v, x, &format!("{path}.{k}"), out),
                    None if zero(v) => {}
                    None => out.push(format!("{path}.{k}")),
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for (i, item) in w.iter().enumerate() {
                match item["name"].as_str() {
                    Some(name) => match g.iter().find(|x| x["name"].as_str() == Some(name)) {
                        Some(x) => lacking(item, x, &format!("{path}[{name}]"), out),
                        None => out.push(format!("{path}[{name}]")),
                    },
                    None => match g.get(i) {
                        Some(x) => lacking(item, x, &format!("{path}[{i}]"), out),
                        None => out.push(format!("{path}[{i}]")),
                    },
                }
            }
        }
        (w, g) if w == g => {}
        _ => out.push(path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_lacks_what_its_template_set_and_it_dropped_or_changed_not_what_was_added() {
        let want = json!({
            "initContainers": [{"name": "side", "image": "b:1", "restartPolicy": "Always"}],
            "containers": [{"name": "main", "image": "b:1", "ports": [{"containerPort": 80}]}],
            "hostNetwork": false,
            "terminationGracePeriodSeconds": 5
        });
        // Defaults and injected items added, a zero value left out: nothing lacks.
        let got = json!({
            "initContainers": [{"name": "side", "image": "b:1", "restartPolicy": "Always",
                                "terminationMessagePath": "/dev/termination-log"}],
            "containers": [{"name": "istio", "image": "x"},
                           {"name": "main", "image": "b:1", "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "terminationGracePeriodSeconds": 5,
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}]
        });
        let mut out = vec![];
        lacking(&want, &got, "spec", &mut out);
        assert!(out.is_empty(), "{out:?}");
        // A field dropped, a value changed, a named item and a positional one missing.
        let got = json!({
            "initContainers": [{"name": "side", "image": "b:1"}],
            "containers": [{"name": "main", "image": "b:2", "ports": []}],
            "terminationGracePeriodSeconds": 5
        });
        lacking(&want, &got, "spec", &mut out);
        assert_eq!(
            out,
            [
                "spec.containers[main].image",
                "spec.containers[main].ports[0]",
                "spec.initContainers[side].restartPolicy"
            ]
        );
        let mut out = vec![];
        lacking(&want, &json!({"containers": []}), "spec", &mut out);
        assert!(
            out.contains(&"spec.containers[main]".to_string()),
            "{out:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_tripwire_ends_a_waiting_step_with_its_reason_and_spares_one_that_ends() {
        let asked = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = asked.clone();
        // Trips from its third question on.
        let steps = Steps::default().with_tripwire(Arc::new(move || {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            (n >= 2).then(|| "the controller panicked".to_string())
        }));
        let quick: u32 = steps.run("answer", async { Ok(7) }).await.unwrap();
        assert_eq!(quick, 7);
        let e = steps
            .run::<()>("wait for the pods", async {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                Ok(())
            })
            .await
            .unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.starts_with("step 2, 'wait for the pods', after "),
            "{text}"
        );
        assert!(text.ends_with(" s: the controller panicked"), "{text}");
        // Asked once a second, it tripped on its third question.
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert!(steps.list()[1].failed);
    }

    #[tokio::test]
    async fn a_failing_step_is_named_and_every_step_is_kept() {
        let steps = Steps::default();
        let one: u32 = steps.run("make it", async { Ok(1) }).await.unwrap();
        assert_eq!(one, 1);
        let e = steps
            .run::<()>("lower the partition to 0", async {
                anyhow::bail!("2 of 3 pods updated")
            })
            .await
            .unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.starts_with("step 2, 'lower the partition to 0', after "),
            "{text}"
        );
        assert!(text.ends_with(": 2 of 3 pods updated"), "{text}");
        let list = steps.list();
        assert_eq!(list.len(), 2);
        assert!(!list[0].failed && list[1].failed);
        assert!(list.iter().all(|s| s.seconds.is_some()));
        assert!(steps.current().is_none());
    }

    #[tokio::test]
    async fn the_way_a_step_passed_is_kept_on_that_step_and_listed() {
        let steps = Steps::default();
        steps
            .run("plain", async { Ok::<_, anyhow::Error>(()) })
            .await
            .unwrap();
        steps
            .run("refused or admitted", async {
                steps.passed_by("refused");
                Ok::<_, anyhow::Error>(())
            })
            .await
            .unwrap();
        let list = steps.list();
        assert_eq!(list[0].way, None);
        assert_eq!(list[1].way.as_deref(), Some("refused"));
        assert_eq!(Steps::ways(&list), ["refused or admitted: refused"]);
        // Outside a step it marks the last one; a record without a way reads as before.
        steps.passed_by("admitted");
        assert_eq!(steps.list()[1].way.as_deref(), Some("admitted"));
        let old: StepRecord =
            serde_json::from_str(r#"{"name":"a","start":0.0,"seconds":1.0,"failed":false}"#)
                .unwrap();
        assert_eq!(old.way, None);
    }

    #[tokio::test]
    async fn a_step_the_scenario_never_left_is_the_current_one() {
        let steps = Steps::default();
        let pending = steps.run::<()>("wait forever", futures::future::pending());
        // Dropped after its first poll, as a scenario's timeout drops its body.
        let _ = tokio::time::timeout(std::time::Duration::from_millis(1), pending).await;
        let (n, s) = steps.current().unwrap();
        assert_eq!((n, s.name.as_str(), s.seconds), (1, "wait forever", None));
    }

    #[test]
    fn subset_matches_what_is_given_and_names_the_first_difference() {
        let live = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
            "spec": {"replicas": 3, "ports": [{"port": 80, "name": "web"}]}});
        assert_eq!(
            subset(&json!({"metadata": {"labels": {"x": "1"}}}), &live),
            Ok(())
        );
        assert_eq!(
            subset(&json!({"spec": {"ports": [{"port": 80}]}}), &live),
            Ok(())
        );
        assert_eq!(
            subset(&json!({"spec": {"replicas": 2}}), &live),
            Err("spec.replicas: expected 2, got 3".into())
        );
        assert_eq!(
            subset(&json!({"spec": {"ports": []}}), &live),
            Err("spec.ports: expected 0 items, got 1".into())
        );
        assert_eq!(
            subset(&json!({"status": {"ready": 1}}), &live),
            Err("status: expected {\"ready\":1}, got nothing".into())
        );
        // An expected null holds where the field is absent.
        assert_eq!(subset(&json!({"metadata": {"uid": null}}), &live), Ok(()));
    }
}
