//! What `history(N)` baselines take from the published partitions' audit
//! records (the partitions themselves are found by `snapshot` for a Hive
//! table, by the Delta snapshot for a Delta table). A directory without a
//! record (not written by dqgate) is counted, never used. Only published
//! partitions have records, so a failed or never-published run cannot
//! appear here.

use serde_json::Value as Json;

use crate::value::Value;
use crate::verdict::history::{PastRun, PastRuns};

/// Adds the run of a partition whose audit record was read as `text`
/// (`Ok(None)`: there is none; `Err`: it could not be read).
pub(crate) fn add_run<E>(
    text: Result<Option<String>, E>,
    pairs: &[(String, String)],
    out: &mut PastRuns,
) {
    match text {
        Ok(Some(text)) => {
            let json = serde_json::from_str::<Json>(&text);
            add_listed(json.as_ref().map(Some), pairs, out)
        }
        Ok(None) => add_listed(Ok::<_, ()>(None), pairs, out),
        Err(_) => out.unreadable += 1,
    }
}

/// Adds the run of a partition whose audit record (its parts `history(N)`
/// reads, see [`crate::publish::record::ListedRecord`]) is `run`.
pub(crate) fn add_listed<E>(
    run: Result<Option<&Json>, E>,
    pairs: &[(String, String)],
    out: &mut PastRuns,
) {
    match run {
        Ok(None) => out.unrecorded += 1,
        Ok(Some(json)) => out.runs.push(past_run(json, pairs)),
        Err(_) => out.unreadable += 1,
    }
}

/// What history reads from a record: the verdict, the row count, and each
/// check's metric and value.
fn past_run(json: &Json, pairs: &[(String, String)]) -> PastRun {
    let mut metrics: Vec<(String, Value)> = Vec::new();
    for c in json
        .get("checks")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = c.get("metric").and_then(Json::as_str) else {
            continue;
        };
        if metrics.iter().any(|(n, _)| n == name) {
            continue;
        }
        let value = c.get("value").map_or(Value::Null, json_value);
        metrics.push((name.to_string(), value));
    }
    PastRun {
        partition: pairs.to_vec(),
        passed: json.get("verdict").and_then(Json::as_str) == Some("pass"),
        row_count: json.pointer("/input/row_count").and_then(Json::as_u64),
        metrics,
    }
}

/// A verdict value read back: integers and decimals exactly (decimals are
/// written as strings), other numbers as floats, other strings as text.
fn json_value(j: &Json) -> Value {
    match j {
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i as i128),
            None => match n.as_u64() {
                Some(u) => Value::Int(u as i128),
                None => n.as_f64().map_or(Value::Null, Value::Float),
            },
        },
        Json::String(s) => decimal(s).unwrap_or_else(|| Value::Text(s.clone())),
        Json::Bool(b) => Value::Bool(*b),
        _ => Value::Null,
    }
}

/// `"-12.50"` → Decimal(-1250, 2); `None` for anything else.
fn decimal(s: &str) -> Option<Value> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !ok(int) || !ok(frac) || frac.len() > 38 {
        return None;
    }
    let value: i128 = format!("{int}{frac}").parse().ok()?;
    let value = if s.starts_with('-') { -value } else { value };
    Some(Value::Decimal {
        value,
        scale: frac.len() as i8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::record::RECORD;
    use crate::publish::Table;
    use std::fs;

    #[test]
    fn values_read_back() {
        assert_eq!(json_value(&serde_json::json!(5)), Value::Int(5));
        assert_eq!(
            json_value(&serde_json::json!(18446744073709551615u64)),
            Value::Int(18446744073709551615)
        );
        assert_eq!(json_value(&serde_json::json!(0.25)), Value::Float(0.25));
        assert_eq!(
            json_value(&serde_json::json!("-12.50")),
            Value::Decimal {
                value: -1250,
                scale: 2
            }
        );
        assert_eq!(
            json_value(&serde_json::json!("2025-03-05")),
            Value::Text("2025-03-05".into())
        );
        assert_eq!(json_value(&Json::Null), Value::Null);
    }

    #[test]
    fn walks_only_key_directories_with_records() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("t");
        let record = r#"{"verdict": "pass", "input": {"row_count": 7},
            "checks": [{"metric": "null_rate(sku)", "value": 0.5}, {"metric": "null_rate(sku)", "value": 9}]}"#;
        for (dir, rec) in [
            ("d=2/s=a", Some(record)),
            ("d=1/s=a", Some("not json")),
            ("d=1/s=b", None),
            ("_dqgate/trail/d=1", Some(record)),
            ("x=1/s=a", Some(record)),
        ] {
            let p = root.join(dir);
            fs::create_dir_all(&p).unwrap();
            if let Some(r) = rec {
                fs::write(p.join(RECORD), r).unwrap();
            }
        }
        let table = Table::open(&root).unwrap();
        let found = table.past_runs(&["d".into(), "s".into()]).unwrap();
        assert_eq!(found.unrecorded, 1);
        assert_eq!(found.unreadable, 1);
        assert_eq!(found.runs.len(), 1);
        let run = &found.runs[0];
        assert_eq!(
            run.partition,
            [("d".into(), "2".into()), ("s".into(), "a".into())]
        );
        assert!(run.passed);
        assert_eq!(run.row_count, Some(7));
        assert_eq!(run.metrics, [("null_rate(sku)".into(), Value::Float(0.5))]);
        let none = Table::open(&tmp.path().join("absent")).unwrap();
        assert_eq!(none.past_runs(&["d".into()]).unwrap(), PastRuns::default());
    }
}
