//! Hive-style `key=value` directories as columns.
//!
//! Spark's `partitionBy` and DuckDB's `PARTITION_BY` write
//! `staged/store_id=3/part-0.parquet` and leave `store_id` out of the file.
//! Readers put it back as a column, typed from the directory values as
//! DuckDB (`hive_types_autocast`) and Spark (partition column type
//! inference) do: integers when every value is one (`BIGINT`), dates when
//! every value is `YYYY-MM-DD`, text otherwise. Values are percent-decoded
//! (`a%20b` is `a b`, as both writers escape them) and
//! `__HIVE_DEFAULT_PARTITION__`, their name for a null, is null.
//!
//! The keys are those every file lies under, in the same order (the longest
//! such sequence): a layout where some files sit outside the key directories
//! gives no Hive columns. A key that the files also hold as a column stays
//! the file's column.

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::ScalarValue;

/// What Spark, Hive and DuckDB write for a null partition value.
pub const NULL_VALUE: &str = "__HIVE_DEFAULT_PARTITION__";

/// The `key=value` components of a relative file path's directories.
pub fn pairs(rel: &str) -> Vec<(String, String)> {
    let mut dirs: Vec<&str> = rel.split('/').collect();
    dirs.pop();
    dirs.iter()
        .filter_map(|d| d.split_once('='))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// How many leading Hive keys every file has, with the same names.
pub fn common_keys<T>(files: &[(String, T)]) -> usize {
    let names: Vec<Vec<String>> = files
        .iter()
        .map(|(rel, _)| pairs(rel).into_iter().map(|(k, _)| k).collect())
        .collect();
    let Some(first) = names.first() else {
        return 0;
    };
    (0..first.len())
        .take_while(|&i| names.iter().all(|n| n.get(i) == Some(&first[i])))
        .count()
}

/// The Hive columns of files given by relative path: one field per key
/// shared by all files that `is_file_column` rejects, and each file's values
/// of them, in field order.
pub fn columns(
    rels: &[&str],
    is_file_column: impl Fn(&str) -> bool,
) -> (Vec<Field>, Vec<Vec<ScalarValue>>) {
    let listed: Vec<(String, ())> = rels.iter().map(|r| (r.to_string(), ())).collect();
    let depth = common_keys(&listed);
    let per_file: Vec<Vec<(String, Option<String>)>> = rels
        .iter()
        .map(|rel| {
            pairs(rel)
                .into_iter()
                .take(depth)
                .map(|(k, v)| (decode(&k), value(&v)))
                .collect()
        })
        .collect();
    let Some(first) = per_file.first() else {
        return (Vec::new(), Vec::new());
    };
    let mut fields = Vec::new();
    let mut picked = Vec::new();
    for (i, (name, _)) in first.iter().enumerate() {
        if is_file_column(name) || fields.iter().any(|f: &Field| f.name() == name) {
            continue;
        }
        let values: Vec<Option<&str>> = per_file.iter().map(|f| f[i].1.as_deref()).collect();
        fields.push(Field::new(name, infer(&values), true));
        picked.push(i);
    }
    let values = per_file
        .iter()
        .map(|f| {
            picked
                .iter()
                .zip(&fields)
                .map(|(&i, field)| typed(f[i].1.as_deref(), field.data_type()))
                .collect()
        })
        .collect();
    (fields, values)
}

/// A directory value: percent-decoded, `None` for the null marker.
fn value(raw: &str) -> Option<String> {
    (raw != NULL_VALUE).then(|| decode(raw))
}

/// The type every non-null value fits: integer, date, else text.
fn infer(values: &[Option<&str>]) -> DataType {
    let present: Vec<&str> = values.iter().flatten().copied().collect();
    if present.is_empty() {
        DataType::Utf8
    } else if present.iter().all(|v| v.parse::<i64>().is_ok()) {
        DataType::Int64
    } else if present.iter().all(|v| date(v).is_some()) {
        DataType::Date32
    } else {
        DataType::Utf8
    }
}

fn typed(v: Option<&str>, ty: &DataType) -> ScalarValue {
    match ty {
        DataType::Int64 => ScalarValue::Int64(v.and_then(|v| v.parse().ok())),
        DataType::Date32 => ScalarValue::Date32(v.and_then(date)),
        _ => ScalarValue::Utf8(v.map(str::to_string)),
    }
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date.
fn date(v: &str) -> Option<i32> {
    let b = v.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let d = chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from((d - epoch).num_days()).ok()
}

/// Percent-decoding, as Spark and DuckDB escape path components; a value
/// whose decoding is not UTF-8 stays as written.
fn decode(raw: &str) -> String {
    if !raw.contains('%') {
        return raw.to_string();
    }
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| raw.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_paths() {
        assert_eq!(
            pairs("region=EU/day=1/batch/part.parquet"),
            vec![("region".into(), "EU".into()), ("day".into(), "1".into())]
        );
        let files = |names: &[&str]| -> Vec<(String, ())> {
            names.iter().map(|n| (n.to_string(), ())).collect()
        };
        assert_eq!(
            common_keys(&files(&["a=1/x.parquet", "a=2/b=3/y.parquet"])),
            1
        );
        assert_eq!(common_keys(&files(&["x.parquet", "batch=2/y.parquet"])), 0);
        assert_eq!(common_keys(&files(&["a=1/x.parquet", "b=2/y.parquet"])), 0);
    }

    #[test]
    fn types_as_duckdb_and_spark_infer_them() {
        let (fields, values) = columns(
            &[
                "s=a%20b%2Fc/d=2025-03-05/n=1/x.parquet",
                "s=__HIVE_DEFAULT_PARTITION__/d=__HIVE_DEFAULT_PARTITION__/n=-3000000000/y.parquet",
                "s=x%3Ay/d=2025-03-06/n=7/z.parquet",
            ],
            |_| false,
        );
        let types: Vec<_> = fields
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect();
        assert_eq!(
            types,
            vec![
                ("s", DataType::Utf8),
                ("d", DataType::Date32),
                ("n", DataType::Int64)
            ]
        );
        assert_eq!(values[0][0], ScalarValue::Utf8(Some("a b/c".into())));
        assert_eq!(values[1][0], ScalarValue::Utf8(None));
        assert_eq!(values[1][1], ScalarValue::Date32(None));
        assert_eq!(values[0][1], ScalarValue::Date32(Some(20152)));
        assert_eq!(values[1][2], ScalarValue::Int64(Some(-3_000_000_000)));
        assert_eq!(values[2][0], ScalarValue::Utf8(Some("x:y".into())));
    }

    #[test]
    fn file_columns_win_and_mixed_values_are_text() {
        let (fields, _) = columns(
            &["a=1/b=2025-01-01/x.parquet", "a=2/b=oops/y.parquet"],
            |c| c == "a",
        );
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].name(), "b");
        assert_eq!(fields[0].data_type(), &DataType::Utf8);
        assert_eq!(decode("%zz%4"), "%zz%4");
        assert_eq!(decode("%C3%A9"), "é");
    }
}
