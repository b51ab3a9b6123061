//! `x_metrics_decode`: the Prometheus text exposition format read into samples, as chainsaw
//! returns them — one `{"metric": {"__name__": ..., labels...}, "value": [seconds, "value"]}`
//! per sample line, ordered by label set (fewer labels first, then the first differing label in
//! name order) and then by time. A sample without a timestamp is stamped `now`.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::{Map, Number, Value, json};

/// One sample line.
struct Sample {
    labels: BTreeMap<String, String>,
    value: f64,
    millis: i64,
}

/// Decodes `text`; `now_ms` stamps samples without a timestamp. The error names the line.
pub fn decode(text: &str, now_ms: i64) -> Result<Vec<Value>, String> {
    let mut samples = vec![];
    let mut typed: BTreeMap<String, usize> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = |m: String| format!("line {}: {m}", i + 1);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if words.next() == Some("TYPE") {
                let name = words
                    .next()
                    .ok_or_else(|| at("TYPE without a name".into()))?;
                let kind = words.next().unwrap_or("");
                if !matches!(
                    kind,
                    "counter" | "gauge" | "histogram" | "summary" | "untyped"
                ) {
                    return Err(at(format!("unknown metric type `{kind}`")));
                }
                if typed.insert(name.to_owned(), i).is_some() {
                    return Err(at(format!("second TYPE line for `{name}`")));
                }
                if samples
                    .iter()
                    .any(|s: &Sample| s.labels["__name__"] == name)
                {
                    return Err(at(format!("TYPE for `{name}` after its samples")));
                }
            }
            continue;
        }
        samples.push(sample(line, now_ms).map_err(at)?);
    }
    samples.sort_by(|a, b| before(&a.labels, &b.labels).then(a.millis.cmp(&b.millis)));
    Ok(samples.into_iter().map(to_json).collect())
}

fn sample(line: &str, now_ms: i64) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("invalid metric name in `{line}`"));
    }
    let mut labels = BTreeMap::from([("__name__".to_owned(), name.to_owned())]);
    let mut rest = line[name_end..].trim_start();
    if let Some(body) = rest.strip_prefix('{') {
        rest = label_pairs(body, &mut labels)?;
    }
    let mut words = rest.split_whitespace();
    let value = words
        .next()
        .ok_or_else(|| format!("no value in `{line}`"))
        .and_then(|v| parse_value(v).ok_or_else(|| format!("invalid value `{v}`")))?;
    let millis = match words.next() {
        Some(t) => t
            .parse::<i64>()
            .map_err(|_| format!("invalid timestamp `{t}`"))?,
        None => now_ms,
    };
    if let Some(extra) = words.next() {
        return Err(format!("unexpected `{extra}` after the timestamp"));
    }
    Ok(Sample {
        labels,
        value,
        millis,
    })
}

/// Reads `name="value", ...}` into `labels`; returns what follows the `}`.
fn label_pairs<'a>(
    mut s: &'a str,
    labels: &mut BTreeMap<String, String>,
) -> Result<&'a str, String> {
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let eq = s.find('=').ok_or("a label without `=`")?;
        let name = s[..eq].trim();
        if name.is_empty()
            || name.starts_with(|c: char| c.is_ascii_digit())
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!("invalid label name `{name}`"));
        }
        let quoted = s[eq + 1..].trim_start();
        let mut chars = quoted.char_indices();
        if chars.next().map(|(_, c)| c) != Some('"') {
            return Err(format!("the value of label `{name}` is not quoted"));
        }
        let mut value = String::new();
        let mut end = None;
        let mut escaped = false;
        for (j, c) in chars {
            if escaped {
                value.push(if c == 'n' { '\n' } else { c });
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                end = Some(j);
                break;
            } else {
                value.push(c);
            }
        }
        let end = end.ok_or_else(|| format!("the value of label `{name}` is not closed"))?;
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("label `{name}` given twice"));
        }
        s = quoted[end + 1..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err("expected `,` or `}` after a label".into());
        }
    }
}

/// Go's `strconv.ParseFloat`, as far as the format uses it (`NaN`, `+Inf`, `-Inf`).
fn parse_value(v: &str) -> Option<f64> {
    match v.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "inf" | "+inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ => v.parse().ok().filter(|f: &f64| f.is_finite()),
    }
}

/// Prometheus's `LabelSet.Before`: fewer labels first; otherwise the first label, in name order
/// over both sets, that one lacks (it comes first) or whose values differ (the lower first).
fn before(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| {
        let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for n in names {
            match (a.get(n), b.get(n)) {
                (None, _) => return Ordering::Less,
                (_, None) => return Ordering::Greater,
                (Some(x), Some(y)) if x != y => return x.cmp(y),
                _ => {}
            }
        }
        Ordering::Equal
    })
}

/// The value as Go's `strconv.FormatFloat(v, 'f', -1, 64)` writes it.
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn to_json(s: Sample) -> Value {
    let metric: Map<String, Value> = s
        .labels
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let seconds = if s.millis % 1000 == 0 {
        Value::from(s.millis / 1000)
    } else {
        Number::from_f64(s.millis as f64 / 1000.0).map_or(Value::Null, Value::Number)
    };
    json!({"metric": metric, "value": [seconds, format_value(s.value)]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chainsaws_example_gives_four_samples_in_label_order() {
        let text = r#"
# TYPE mf2 counter
mf2 3
mf1{label="value1"} -3.14 123456
mf1{label="value2"} 42
mf2 4
"#;
        let got = decode(text, 5000).unwrap();
        assert_eq!(
            Value::Array(got),
            json!([
                {"metric": {"__name__": "mf2"}, "value": [5, "3"]},
                {"metric": {"__name__": "mf2"}, "value": [5, "4"]},
                {"metric": {"__name__": "mf1", "label": "value1"}, "value": [123.456, "-3.14"]},
                {"metric": {"__name__": "mf1", "label": "value2"}, "value": [5, "42"]},
            ])
        );
    }

    #[test]
    fn escapes_special_values_and_errors() {
        let got = decode(
            "a{x=\"q\\\"\\n\\\\\",} NaN\nb +Inf 1\nc -Inf\n# HELP d text\n",
            0,
        )
        .unwrap();
        // One label before two: b and c (by name), then a.
        let names: Vec<&Value> = got.iter().map(|s| &s["metric"]["__name__"]).collect();
        assert_eq!(names, [&json!("b"), &json!("c"), &json!("a")]);
        assert_eq!(got[2]["metric"]["x"], json!("q\"\n\\"));
        assert_eq!(got[2]["value"][1], json!("NaN"));
        assert_eq!(got[0]["value"], json!([0.001, "+Inf"]));
        assert_eq!(got[1]["value"][1], json!("-Inf"));
        for (text, error) in [
            ("a{x=1} 2", "line 1: the value of label `x` is not quoted"),
            ("a{x=\"1} 2", "line 1: the value of label `x` is not closed"),
            ("a b", "line 1: invalid value `b`"),
            ("a", "line 1: no value in `a`"),
            ("a 1 2 3", "line 1: unexpected `3` after the timestamp"),
            ("\n1a 2", "line 2: invalid metric name in `1a 2`"),
            (
                "# TYPE a gauge\n# TYPE a gauge",
                "line 2: second TYPE line for `a`",
            ),
            (
                "a 1\n# TYPE a gauge",
                "line 2: TYPE for `a` after its samples",
            ),
            ("# TYPE a meter", "line 1: unknown metric type `meter`"),
            ("a{x=\"1\",x=\"2\"} 1", "line 1: label `x` given twice"),
        ] {
            assert_eq!(decode(text, 0).unwrap_err(), error, "{text}");
        }
    }
}
