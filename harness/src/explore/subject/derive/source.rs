//! Where the kinds' schemas come from as subjects are derived: [`Source`] (start there), a
//! cell's CRDs and OpenAPI or nothing, tells each kind's served [`Version`]s, its claim
//! templates, a union's members, and the settings and seed variants its schema gives.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::explore::openapi::Doc;
use crate::explore::schema::{self, Shape};
use crate::explore::subject::catalog::{Union, WORKLOADS, Workload};
use crate::explore::subject::{Subject, claims_at};
use crate::explore::trial::{Fields, Rng, stream_of};

/// Where the kinds' schemas come from.
pub(super) enum Source<'a> {
    /// Nowhere: each kind at the version its seed is written for.
    Known,
    /// A cell: its CRDs and its OpenAPI.
    Cell {
        crds: &'a BTreeMap<String, Value>,
        doc: &'a Doc,
    },
}

/// One served version of a kind.
pub(super) struct Version<'a> {
    /// Its API version.
    pub(super) api_version: String,
    /// Its name (`v1beta1`).
    pub(super) name: String,
    /// Its `spec` schema (null when not read, or for a built-in kind).
    pub(super) spec: Arc<Value>,
    /// Whether it is the version the kind's seed is written for.
    pub(super) plain: bool,
    /// The CRD serving it.
    pub(super) crd: Option<&'a Value>,
}

impl Version<'_> {
    /// The suffix of the name of a subject in it: none for the plain version.
    pub(super) fn suffix(&self) -> String {
        match self.plain {
            true => String::new(),
            false => format!("@{}", self.name),
        }
    }
}

/// The node at `path` (dot-separated, from `spec`) of a version's `spec` schema.
pub(super) fn spec_at<'v>(spec: &'v Value, path: &str) -> Option<&'v Value> {
    let rest = path.strip_prefix("spec").unwrap_or(path);
    let mut at = spec;
    for part in rest.split('.').filter(|p| !p.is_empty()) {
        at = at["properties"].get(part)?;
    }
    Some(at)
}

/// The booleans that hold all of a kind's pods, in the API's two words for it: a Job or a
/// CronJob suspends, a BroadcastJob or an AdvancedCronJob pauses. The first a schema has is
/// the one (see [`crate::explore::subject::Subject::idle`]).
pub(super) const HOLDS: [&str; 2] = ["spec.suspend", "spec.paused"];

/// The first of [`HOLDS`] that CRD `spec` schema has as a boolean.
fn holds(spec: &Value) -> Option<String> {
    HOLDS
        .into_iter()
        .find(|at| spec_at(spec, at).is_some_and(|n| n["type"] == "boolean"))
        .map(String::from)
}

impl<'a> Source<'a> {
    /// The versions of kind `kind` (whose seed is written for `api_version`) it serves, the
    /// plain one first; a built-in kind's only version.
    pub(super) fn versions(
        &self,
        api_version: &'static str,
        kind: &str,
        builtin: bool,
    ) -> Vec<Version<'a>> {
        let (group, written) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let plain = || Version {
            api_version: api_version.to_string(),
            name: written.to_string(),
            spec: Arc::new(Value::Null),
            plain: true,
            crd: None,
        };
        let crds = match self {
            Source::Cell { crds, .. } if !builtin => crds,
            _ => return vec![plain()],
        };
        let Some(crd) = crds.get(&format!("{group}/{kind}")) else {
            return vec![];
        };
        let mut out: Vec<Version<'a>> = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["served"] != Value::Bool(false))
            .filter_map(|v| {
                let name = v["name"].as_str()?;
                Some(Version {
                    api_version: format!("{group}/{name}"),
                    name: name.to_string(),
                    spec: Arc::new(v["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()),
                    plain: name == written,
                    crd: Some(crd),
                })
            })
            .collect();
        out.sort_by_key(|v| !v.plain);
        out
    }

    /// Whether workload `w` in version `v` has claim templates beside its pod template.
    pub(super) fn claims(&self, w: &Workload, v: &Version<'_>) -> bool {
        let at = claims_at(w.template);
        match self {
            Source::Known => false,
            Source::Cell { doc, .. } if w.builtin => doc
                .kind_schema(w.api_version, w.kind)
                .and_then(|root| doc.at(root, &at))
                .is_some(),
            Source::Cell { .. } => spec_at(&v.spec, &at).is_some(),
        }
    }

    /// The boolean that holds all the pods of workload `w` in version `v` (a built-in kind's
    /// read from the cell's OpenAPI, `v` aside), if its schema has one ([`HOLDS`]).
    pub(super) fn suspend(&self, w: &Workload, v: Option<&Version<'_>>) -> Option<String> {
        match self {
            Source::Known => None,
            Source::Cell { doc, .. } if w.builtin => HOLDS.into_iter().find_map(|at| {
                let root = doc.kind_schema(w.api_version, w.kind)?;
                let node = doc.resolve(doc.at(root, at)?).1;
                (node["type"] == "boolean").then(|| at.to_string())
            }),
            Source::Cell { .. } => holds(&v?.spec),
        }
    }

    /// The boolean that holds all the pods of a union kind in version `v` ([`HOLDS`]).
    pub(super) fn union_holds(&self, v: &Version<'_>) -> Option<String> {
        match self {
            Source::Known => None,
            Source::Cell { .. } => holds(&v.spec),
        }
    }

    /// Whether workload `w`, in the version its seed is written for, has claim templates.
    pub(super) fn kind_claims(&self, w: &Workload) -> bool {
        self.versions(w.api_version, w.kind, w.builtin)
            .iter()
            .any(|v| v.plain && self.claims(w, v))
    }

    /// The workloads of the catalog the members of union `u` in version `v` hold, the one
    /// with the twin first: without a cell, that one only.
    pub(super) fn members(&self, u: &Union, v: &Version<'_>) -> Vec<&'static Workload> {
        let twin = u.twin.map(|(m, _)| m);
        let mut out: Vec<&'static Workload> = match self {
            Source::Known => WORKLOADS
                .iter()
                .filter(|w| twin == Some(w.member().as_str()))
                .collect(),
            Source::Cell { .. } => {
                let at = spec_at(&v.spec, u.members_at).map(|s| &s["properties"]);
                WORKLOADS
                    .iter()
                    .filter(|w| at.is_some_and(|p| p.get(w.member()).is_some()))
                    .collect()
            }
        };
        out.sort_by_key(|w| twin != Some(w.member().as_str()));
        out
    }

    /// The settings of subject `s` in version `v`: each string and each number of its spec
    /// outside its pod template, its replicas and lists, with the values its schema gives
    /// it: a string's (an enum's members, the words its description quotes, else its twin's
    /// enum), a number's typical one (the first its shape is tried with: a count of one, or
    /// the least the schema allows); none without a cell.
    pub(super) fn settings(&self, s: &Subject, v: &Version<'_>) -> Vec<(String, Vec<Value>)> {
        let Source::Cell { doc, .. } = self else {
            return vec![];
        };
        let outside = |p: &str| {
            let template = !s.template.is_empty()
                && (p == s.template || p.starts_with(&format!("{}.", s.template)));
            !template && !p.contains('[') && p != "spec.replicas"
        };
        let Some(crd) = v.crd else {
            // A built-in kind: its schema as the cell serves it.
            let mut out = vec![];
            if let Some(root) = doc.kind_schema(&s.api_version, s.kind)
                && let Some(spec) = doc.at(root, "spec")
            {
                settings_below(doc, spec, "spec", &outside, 0, &mut out);
            }
            return out;
        };
        let twin_root = s
            .twin
            .as_deref()
            .and_then(|t| doc.kind_schema(&t.api_version, t.kind));
        let words = |w: &[String]| w.iter().map(|x| json!(x)).collect::<Vec<Value>>();
        schema::leaves(crd, &v.name)
            .into_iter()
            .filter(|l| outside(&l.path))
            .filter_map(|l| {
                let values = match &l.shape {
                    Shape::Enum(members) => words(members),
                    Shape::String(w) if !w.is_empty() => words(w),
                    Shape::String(_) => {
                        let path = s.twin_path(&l.path)?;
                        let members = doc.at(twin_root?, &path)?["enum"].as_array()?;
                        members.iter().filter(|m| m.is_string()).cloned().collect()
                    }
                    Shape::Integer { .. } | Shape::IntOrString => {
                        l.shape.values().into_iter().take(1).collect()
                    }
                    _ => return None,
                };
                (!values.is_empty()).then_some((l.path, values))
            })
            .collect()
    }

    /// What the pods of subject `s` ask of the cell's nodes, as settings: each map of
    /// quantities of its pod template that lies in an item of a list its seed has (what a
    /// container the seed declares asks for), with the first value its shape is tried with
    /// that asks for something the seed or the nodes name ([`Shape::values`]: what the seed
    /// states there grown, else a resource the nodes offer); none without a cell or a
    /// template. A pod in use asks for
    /// some of what its node has, as a set has replicas: a setting of the subject, not only
    /// one leaf of its template among hundreds.
    pub(super) fn asked(&self, s: &Subject) -> Vec<(String, Vec<Value>)> {
        let Source::Cell { doc, .. } = self else {
            return vec![];
        };
        if s.template.is_empty() {
            return vec![];
        }
        let seed = s.seed.make("x");
        let has_items = |path: &str| {
            let lists: Vec<&str> = path.match_indices("[0]").map(|(i, _)| &path[..i]).collect();
            !lists.is_empty()
                && lists.iter().all(|l| {
                    crate::explore::subject::get(&seed, l)
                        .as_array()
                        .is_some_and(|a| !a.is_empty())
                })
        };
        schema::template_leaves(doc, &s.template, &seed)
            .into_iter()
            .filter(|l| matches!(l.shape, Shape::Quantities { .. }) && has_items(&l.path))
            .filter_map(|l| {
                let asks = l.shape.values().into_iter().find(|v| {
                    v.as_object()
                        .is_some_and(|m| !m.is_empty() && !m.contains_key(schema::MAP_KEY))
                })?;
                Some((l.path, vec![asks]))
            })
            .collect()
    }

    /// The seed variants of subject `s` in version `v` (see [`Subject::variants`]), its
    /// target's aside: the replicas either side of its seed's (not below one), and rows of
    /// its settings' values, what its pods ask of the nodes among them ([`Source::asked`]),
    /// that bring each value of every setting together with each value of every other
    /// ([`paired`]), in an order of the subject's own.
    pub(super) fn variants(&self, s: &Subject, v: &Version<'_>) -> Vec<Fields> {
        if matches!(self, Source::Known) {
            return vec![];
        }
        let mut out = vec![];
        if s.replicated
            && s.target.is_none()
            && let Some(r) = s.seed.make("x")["spec"]["replicas"].as_i64()
        {
            for n in [r - 1, r + 1].into_iter().filter(|n| *n >= 1) {
                out.push(Fields::from([("spec.replicas".to_string(), json!(n))]));
            }
        }
        let mut rng = Rng::new(stream_of(&s.name), 0);
        let mut settings = self.settings(s, v);
        settings.extend(self.asked(s));
        out.extend(paired(&settings, PAIRED, &mut rng));
        out
    }
}

/// The most settings a seed variant sets: enough that three settings meet in one, few enough
/// that a variant the API refuses, for one pair in it, takes few others down with it.
pub(super) const PAIRED: usize = 3;

/// Rows of at most `most` of `settings` (each with its values) that bring each value of
/// every setting together with each value of every other in some row (pairwise), the rest
/// of the spec as the seed has it; with one setting, each of its values alone. Each row starts
/// from a pair not brought together yet, in an order drawn from `rng`, and takes in, setting
/// by setting in an order drawn from `rng`, the value that brings the most pairs not yet
/// together with the row's, while the row has room and one brings any.
pub(super) fn paired(settings: &[(String, Vec<Value>)], most: usize, rng: &mut Rng) -> Vec<Fields> {
    let settings: Vec<&(String, Vec<Value>)> =
        settings.iter().filter(|s| !s.1.is_empty()).collect();
    let row_of = |row: &[(usize, usize)]| -> Fields {
        row.iter()
            .map(|&(f, i)| (settings[f].0.clone(), settings[f].1[i].clone()))
            .collect()
    };
    if settings.len() < 2 {
        return settings
            .iter()
            .flat_map(|(_, values)| (0..values.len()).map(|i| row_of(&[(0, i)])))
            .collect();
    }
    type Pair = ((usize, usize), (usize, usize));
    let pair = |x: (usize, usize), y: (usize, usize)| -> Pair { (x.min(y), x.max(y)) };
    let mut pairs: Vec<Pair> = vec![];
    for a in 0..settings.len() {
        for b in a + 1..settings.len() {
            for i in 0..settings[a].1.len() {
                for j in 0..settings[b].1.len() {
                    pairs.push(((a, i), (b, j)));
                }
            }
        }
    }
    rng.shuffle(&mut pairs);
    let mut together: BTreeSet<Pair> = BTreeSet::new();
    let mut rows = vec![];
    for &(x, y) in &pairs {
        if together.contains(&(x, y)) {
            continue;
        }
        let mut row = vec![x, y];
        let mut order: Vec<usize> = (0..settings.len())
            .filter(|f| *f != x.0 && *f != y.0)
            .collect();
        rng.shuffle(&mut order);
        for f in order {
            if row.len() >= most.max(2) {
                break;
            }
            let new = |i: usize| {
                row.iter()
                    .filter(|&&r| !together.contains(&pair((f, i), r)))
                    .count()
            };
            let best = (0..settings[f].1.len())
                .max_by_key(|i| (new(*i), std::cmp::Reverse(*i)))
                .filter(|i| new(*i) > 0);
            if let Some(i) = best {
                row.push((f, i));
            }
        }
        for (k, &a) in row.iter().enumerate() {
            for &b in &row[k + 1..] {
                together.insert(pair(a, b));
            }
        }
        rows.push(row_of(&row));
    }
    rows
}

/// The settings below schema node `node` at `path` of `doc` (its `$ref`s followed), where
/// `outside` holds, not through lists, at most four objects deep: each string enum with its
/// members, each integer and int-or-string with its typical value (see
/// [`Source::settings`]).
pub(super) fn settings_below(
    doc: &Doc,
    node: &Value,
    path: &str,
    outside: &dyn Fn(&str) -> bool,
    depth: usize,
    out: &mut Vec<(String, Vec<Value>)>,
) {
    let node = doc.resolve(node).1;
    for (k, child) in node["properties"].as_object().into_iter().flatten() {
        let at = format!("{path}.{k}");
        let child = doc.resolve(child).1;
        if !outside(&at) || child["type"] == "array" {
            continue;
        }
        if let Some(shape) = schema::number(child) {
            out.push((at, shape.values().into_iter().take(1).collect()));
        } else if let Some(members) = child["enum"].as_array() {
            let members: Vec<Value> = members.iter().filter(|m| m.is_string()).cloned().collect();
            if !members.is_empty() {
                out.push((at, members));
            }
        } else if depth < 4 && child["properties"].is_object() {
            settings_below(doc, child, &at, outside, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(sizes: &[usize]) -> Vec<(String, Vec<Value>)> {
        sizes
            .iter()
            .enumerate()
            .map(|(f, n)| (format!("spec.s{f}"), (0..*n).map(|i| json!(i)).collect()))
            .collect()
    }

    #[test]
    fn paired_rows_bring_every_two_values_of_two_settings_together_in_few_settings() {
        for sizes in [
            vec![2, 3, 1, 1, 1, 2],
            vec![1, 1],
            vec![4, 1, 1, 1, 1, 1, 1, 1],
        ] {
            let s = settings(&sizes);
            let rows = paired(&s, PAIRED, &mut Rng::new(7, 0));
            assert!(
                rows.iter().all(|r| (2..=PAIRED).contains(&r.len())),
                "{rows:?}"
            );
            for a in 0..s.len() {
                for b in a + 1..s.len() {
                    for x in &s[a].1 {
                        for y in &s[b].1 {
                            assert!(
                                rows.iter()
                                    .any(|r| r.get(&s[a].0) == Some(x) && r.get(&s[b].0) == Some(y)),
                                "{sizes:?}: {} {x} with {} {y}",
                                s[a].0,
                                s[b].0
                            );
                        }
                    }
                }
            }
            // Fewer rows than pairs where rows hold three.
            let pairs: usize = (0..sizes.len())
                .flat_map(|a| (a + 1..sizes.len()).map(move |b| (a, b)))
                .map(|(a, b)| sizes[a] * sizes[b])
                .sum();
            assert!(rows.len() <= pairs, "{} rows for {pairs} pairs", rows.len());
            if pairs > 3 {
                assert!(rows.len() < pairs, "{} rows for {pairs} pairs", rows.len());
            }
            assert_eq!(rows, paired(&s, PAIRED, &mut Rng::new(7, 0)), "drawn alike");
        }
        // One setting: each value alone; none: nothing.
        let one = paired(&settings(&[3]), PAIRED, &mut Rng::new(7, 0));
        assert_eq!(one.len(), 3);
        assert!(one.iter().all(|r| r.len() == 1));
        assert!(paired(&[], PAIRED, &mut Rng::new(7, 0)).is_empty());
    }
}
