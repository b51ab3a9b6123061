//! Field paths in a JSON object, as trials name fields (`spec.template.spec.containers[0].image`),
//! and the placeholders a trial's data holds for what it is given only when it runs.

use serde_json::{Value, json};

/// In a seed or a value, the name of the trial's namespace: resolved when the trial runs
/// ([`super::subject::resolve`]), so that a trial stays the same data whatever namespace it runs in.
pub const NAMESPACE: &str = "$(NAMESPACE)";

/// In a seed or a value, the name of the trial's object (prefixed with the namespace for a
/// cluster-scoped kind).
pub const NAME: &str = "$(NAME)";

/// Sets `path` (dot-separated, `name[i]` for a list item) in `obj` to `value`, making the
/// objects on the way; `null` removes the field (and makes nothing: under an absent object,
/// the field is absent already). Fails on a path through a non-object, or an item past the
/// end of a list.
pub fn set(obj: &mut Value, path: &str, value: Value) -> Result<(), String> {
    assign(obj, path, value, true)
}

/// As [`set`], but a `null` is kept as a value (a merge patch's removal).
pub fn put(obj: &mut Value, path: &str, value: Value) -> Result<(), String> {
    assign(obj, path, value, false)
}

fn assign(obj: &mut Value, path: &str, value: Value, null_removes: bool) -> Result<(), String> {
    let mut at = obj;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let (key, index) = match part.split_once('[') {
            Some((k, rest)) => {
                let n: usize = rest
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| format!("{path}: `{part}` is not `name[index]`"))?;
                (k, Some(n))
            }
            None => (*part, None),
        };
        let map = at
            .as_object_mut()
            .ok_or_else(|| format!("{path}: `{key}` is inside a non-object"))?;
        if last && index.is_none() {
            if value.is_null() && null_removes {
                map.remove(key);
            } else {
                map.insert(key.into(), value);
            }
            return Ok(());
        }
        if value.is_null() && null_removes && !map.contains_key(key) {
            return Ok(());
        }
        let next = map.entry(key).or_insert_with(|| match index {
            Some(_) => json!([]),
            None => json!({}),
        });
        at = match index {
            Some(n) => {
                let list = next
                    .as_array_mut()
                    .ok_or_else(|| format!("{path}: `{key}` is not a list"))?;
                let item = list
                    .get_mut(n)
                    .ok_or_else(|| format!("{path}: `{key}` has no item {n}"))?;
                if last {
                    *item = value;
                    return Ok(());
                }
                item
            }
            None => next,
        };
    }
    Ok(())
}

/// The path of the object that holds `path`'s last field (`spec` for `spec.template`).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('.').map_or("", |(p, _)| p)
}

/// Where a workload whose pod template is at `template` declares its claim templates: beside
/// it (`spec.volumeClaimTemplates` for `spec.template`).
pub fn claims_at(template: &str) -> String {
    format!("{}.volumeClaimTemplates", parent(template))
}

/// The value at `path` in `obj` (see [`set`]), or null.
pub fn get<'a>(obj: &'a Value, path: &str) -> &'a Value {
    let mut at = obj;
    for part in path.split('.') {
        at = match part.split_once('[') {
            Some((k, rest)) => {
                let n: usize = rest.trim_end_matches(']').parse().unwrap_or(usize::MAX);
                &at[k][n]
            }
            None => &at[part],
        };
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_under_an_absent_object_makes_nothing() {
        let mut o = json!({"spec": {"a": 1}});
        set(&mut o, "spec.b.c", Value::Null).unwrap();
        assert_eq!(o, json!({"spec": {"a": 1}}));
        set(&mut o, "spec.a", Value::Null).unwrap();
        assert_eq!(o, json!({"spec": {}}));
        set(&mut o, "spec.b.c", json!(2)).unwrap();
        assert_eq!(o, json!({"spec": {"b": {"c": 2}}}));
        // A merge patch keeps its null, and makes the objects on the way to it.
        let mut p = json!({});
        put(&mut p, "spec.b.c", Value::Null).unwrap();
        assert_eq!(p, json!({"spec": {"b": {"c": null}}}));
    }
}
