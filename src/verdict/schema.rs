//! Schema checks: `column c is TYPE [null | not null]` against the staged
//! schema, and `schema matches published` against the published version's.
//!
//! Both are answered from the Parquet footers; no data page is read.
//!
//! A declared type is a *logical* type: the physical Arrow encodings that hold
//! the same values are accepted as the same (see [`accepts`]). The comparison
//! with the published schema is exact: any change of Arrow type, including an
//! encoding change such as `string` → `large_string`, is drift, because a
//! reader compiled against the old schema may break on it.

use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use super::{CheckResult, Drift, DriftKind, Source, Status};
use crate::check::{CheckedStatement, Metric};
use crate::dsl::ast::DeclaredType;
use crate::dsl::types::canonical;
use crate::value::Value;

/// Judges a schema statement (`Metric::SchemaDrift` or `Metric::ColumnType`).
pub fn judge(
    s: &CheckedStatement,
    staged_schema: &Schema,
    published_schema: Result<&Schema, &str>,
) -> CheckResult {
    let mut r = CheckResult {
        line: s.line,
        name: s.name.clone(),
        severity: s.severity,
        metric: s.metric.name(),
        value: Value::Null,
        expected: String::new(),
        status: Status::Skipped,
        samples: None,
        note: None,
        source: Source::Metadata,
        nulls: None,
        drift: None,
        compared_with: None,
        failed_rows: None,
    };
    match &s.metric {
        Metric::ColumnType {
            column,
            declared,
            nullable,
        } => {
            r.expected = describe_declared(declared, *nullable);
            match staged_schema.field_with_name(column) {
                Ok(f) => {
                    r.value = Value::Text(describe_field(f));
                    r.status = pass_if(field_matches(declared, *nullable, f));
                }
                Err(_) => {
                    r.status = Status::Fail;
                    r.note = Some(missing_column(column, staged_schema));
                }
            }
        }
        _ => {
            r.expected = "= 0".into();
            match published_schema {
                Err(why) => r.note = Some(why.to_string()),
                Ok(published) => {
                    let d = drift(published, staged_schema);
                    r.value = Value::Int(d.len() as i128);
                    r.status = pass_if(d.is_empty());
                    if !d.is_empty() {
                        r.drift = Some(d);
                    }
                }
            }
        }
    }
    r
}

fn pass_if(ok: bool) -> Status {
    if ok {
        Status::Pass
    } else {
        Status::Fail
    }
}

fn missing_column(column: &str, schema: &Schema) -> String {
    let name = crate::check::quote_ident(column);
    let names = schema.fields().iter().map(|f| f.name().as_str());
    match crate::diagnostic::suggest(column, names) {
        Some(s) => format!(
            "the staged files have no column {name}; did you mean {}?",
            crate::check::quote_ident(s)
        ),
        None => format!("the staged files have no column {name}"),
    }
}

/// Whether the staged Arrow type `actual` holds values of the declared type.
///
/// Accepted as the same: any dictionary encoding of an accepted type;
/// `string` = Utf8, LargeUtf8, Utf8View; `binary` = Binary, LargeBinary,
/// BinaryView; `decimal(p, s)` = Decimal32/64/128/256 with that precision
/// and scale; `date` = Date32, Date64; `time` = Time32, Time64 in any unit;
/// `timestamp` = any unit and zone, `timestamp(u)` = unit `u`, any zone,
/// `timestamp(u, 'Z')` = unit `u` in zone `Z` (`UTC`, `Etc/UTC`, `Z`,
/// `+00:00` and `+0000` all name UTC). Integer widths and signedness and
/// float widths must match exactly.
pub fn accepts(declared: &DeclaredType, actual: &DataType) -> bool {
    use DataType as A;
    use DeclaredType as D;
    if let A::Dictionary(_, values) = actual {
        return accepts(declared, values);
    }
    match declared {
        D::Boolean => actual == &A::Boolean,
        D::Int8 => actual == &A::Int8,
        D::Int16 => actual == &A::Int16,
        D::Int32 => actual == &A::Int32,
        D::Int64 => actual == &A::Int64,
        D::UInt8 => actual == &A::UInt8,
        D::UInt16 => actual == &A::UInt16,
        D::UInt32 => actual == &A::UInt32,
        D::UInt64 => actual == &A::UInt64,
        D::Float32 => actual == &A::Float32,
        D::Float64 => actual == &A::Float64,
        D::Decimal { precision, scale } => match actual {
            A::Decimal32(p, s) | A::Decimal64(p, s) | A::Decimal128(p, s) | A::Decimal256(p, s) => {
                p == precision && s == scale
            }
            _ => false,
        },
        D::String => matches!(actual, A::Utf8 | A::LargeUtf8 | A::Utf8View),
        D::Binary => matches!(actual, A::Binary | A::LargeBinary | A::BinaryView),
        D::Date => matches!(actual, A::Date32 | A::Date64),
        D::Time => matches!(actual, A::Time32(_) | A::Time64(_)),
        D::Timestamp { unit, tz } => match actual {
            A::Timestamp(u, z) => {
                unit.as_deref().is_none_or(|want| want == unit_name(*u))
                    && tz
                        .as_deref()
                        .is_none_or(|want| z.as_deref().is_some_and(|have| same_zone(want, have)))
            }
            _ => false,
        },
    }
}

const UTC_NAMES: [&str; 5] = ["utc", "etc/utc", "z", "+00:00", "+0000"];

fn same_zone(a: &str, b: &str) -> bool {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    a == b || (UTC_NAMES.contains(&a.as_str()) && UTC_NAMES.contains(&b.as_str()))
}

fn unit_name(u: TimeUnit) -> &'static str {
    match u {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    }
}

/// An Arrow type in the rule language's words, precise enough that two
/// different types never read the same (`decimal(12, 2)` is Decimal128,
/// `large_string` is LargeUtf8).
pub fn describe(ty: &DataType) -> String {
    use DataType as A;
    let simple = match ty {
        A::Boolean => "boolean",
        A::Int8 => "int8",
        A::Int16 => "int16",
        A::Int32 => "int32",
        A::Int64 => "int64",
        A::UInt8 => "uint8",
        A::UInt16 => "uint16",
        A::UInt32 => "uint32",
        A::UInt64 => "uint64",
        A::Float16 => "float16",
        A::Float32 => "float32",
        A::Float64 => "float64",
        A::Utf8 => "string",
        A::LargeUtf8 => "large_string",
        A::Utf8View => "string_view",
        A::Binary => "binary",
        A::LargeBinary => "large_binary",
        A::BinaryView => "binary_view",
        A::Date32 => "date",
        A::Date64 => "date64",
        A::Null => "null",
        _ => "",
    };
    if !simple.is_empty() {
        return simple.into();
    }
    match ty {
        A::Decimal128(p, s) => format!("decimal({p}, {s})"),
        A::Decimal32(p, s) => format!("decimal32({p}, {s})"),
        A::Decimal64(p, s) => format!("decimal64({p}, {s})"),
        A::Decimal256(p, s) => format!("decimal256({p}, {s})"),
        A::FixedSizeBinary(n) => format!("fixed_size_binary({n})"),
        A::Time32(u) | A::Time64(u) => format!("time({})", unit_name(*u)),
        A::Timestamp(u, None) => format!("timestamp({})", unit_name(*u)),
        A::Timestamp(u, Some(z)) => format!("timestamp({}, '{z}')", unit_name(*u)),
        A::Dictionary(k, v) => format!("dictionary({}, {})", describe(k), describe(v)),
        other => other.to_string(),
    }
}

/// A field's type and nullability: `decimal(12, 2) not null`.
pub fn describe_field(f: &Field) -> String {
    format!(
        "{} {}",
        describe(f.data_type()),
        nullability(f.is_nullable())
    )
}

fn nullability(nullable: bool) -> &'static str {
    if nullable {
        "null"
    } else {
        "not null"
    }
}

/// The declaration as the verdict's `expected` shows it.
pub fn describe_declared(declared: &DeclaredType, nullable: Option<bool>) -> String {
    match nullable {
        None => canonical(declared),
        Some(n) => format!("{} {}", canonical(declared), nullability(n)),
    }
}

/// Whether a staged field satisfies a declaration.
pub fn field_matches(declared: &DeclaredType, nullable: Option<bool>, f: &Field) -> bool {
    accepts(declared, f.data_type()) && nullable.is_none_or(|n| n == f.is_nullable())
}

/// Differences between the published and the staged schema: for each
/// published column in its order, missing / type / nullability; then each
/// extra staged column in its order. Column order itself is not compared.
pub fn drift(published: &Schema, staged: &Schema) -> Vec<Drift> {
    let mut out = Vec::new();
    for p in published.fields() {
        let Some(s) = staged.fields().iter().find(|s| s.name() == p.name()) else {
            out.push(Drift {
                column: p.name().clone(),
                change: DriftKind::Missing,
                published: Some(describe_field(p)),
                staged: None,
            });
            continue;
        };
        if p.data_type() != s.data_type() {
            out.push(Drift {
                column: p.name().clone(),
                change: DriftKind::Type,
                published: Some(describe(p.data_type())),
                staged: Some(describe(s.data_type())),
            });
        }
        if p.is_nullable() != s.is_nullable() {
            out.push(Drift {
                column: p.name().clone(),
                change: DriftKind::Nullability,
                published: Some(nullability(p.is_nullable()).into()),
                staged: Some(nullability(s.is_nullable()).into()),
            });
        }
    }
    for s in staged.fields() {
        if published.field_with_name(s.name()).is_err() {
            out.push(Drift {
                column: s.name().clone(),
                change: DriftKind::Extra,
                published: None,
                staged: Some(describe_field(s)),
            });
        }
    }
    out
}

/// One drift entry for people: `amount: type decimal(12, 2) -> decimal(14, 2)`.
pub fn drift_line(d: &Drift) -> String {
    let name = crate::check::quote_ident(&d.column);
    match d.change {
        DriftKind::Missing => format!(
            "{name}: missing (published as {})",
            d.published.as_deref().unwrap_or("")
        ),
        DriftKind::Extra => format!(
            "{name}: extra (staged as {})",
            d.staged.as_deref().unwrap_or("")
        ),
        DriftKind::Type | DriftKind::Nullability => format!(
            "{name}: {} changed {} -> {}",
            d.change.as_str(),
            d.published.as_deref().unwrap_or(""),
            d.staged.as_deref().unwrap_or("")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(u: TimeUnit, z: Option<&str>) -> DataType {
        DataType::Timestamp(u, z.map(Into::into))
    }

    fn decl_ts(unit: Option<&str>, tz: Option<&str>) -> DeclaredType {
        DeclaredType::Timestamp {
            unit: unit.map(Into::into),
            tz: tz.map(Into::into),
        }
    }

    #[test]
    fn logical_types_accept_their_encodings() {
        let dict = |v: DataType| DataType::Dictionary(Box::new(DataType::Int32), Box::new(v));
        for t in [
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Utf8View,
            dict(DataType::Utf8),
        ] {
            assert!(accepts(&DeclaredType::String, &t), "{t}");
        }
        assert!(!accepts(&DeclaredType::String, &DataType::Binary));
        let dec = DeclaredType::Decimal {
            precision: 12,
            scale: 2,
        };
        assert!(accepts(&dec, &DataType::Decimal128(12, 2)));
        assert!(accepts(&dec, &DataType::Decimal256(12, 2)));
        assert!(!accepts(&dec, &DataType::Decimal128(14, 2)));
        assert!(!accepts(&dec, &DataType::Decimal128(12, 3)));
        assert!(!accepts(&DeclaredType::Int64, &DataType::Int32));
        assert!(!accepts(&DeclaredType::Int64, &DataType::UInt64));
        assert!(accepts(&DeclaredType::Date, &DataType::Date64));
    }

    #[test]
    fn timestamps_match_on_what_is_declared() {
        let us_utc = ts(TimeUnit::Microsecond, Some("UTC"));
        assert!(accepts(&decl_ts(None, None), &us_utc));
        assert!(accepts(&decl_ts(Some("us"), None), &us_utc));
        assert!(!accepts(&decl_ts(Some("ms"), None), &us_utc));
        assert!(accepts(&decl_ts(Some("us"), Some("+00:00")), &us_utc));
        assert!(!accepts(
            &decl_ts(Some("us"), Some("Europe/Berlin")),
            &us_utc
        ));
        assert!(!accepts(
            &decl_ts(Some("us"), Some("UTC")),
            &ts(TimeUnit::Microsecond, None)
        ));
    }

    #[test]
    fn drift_is_reported_column_by_column() {
        let published = Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Decimal128(12, 2), true),
            Field::new("c", DataType::Utf8, true),
        ]);
        let staged = Schema::new(vec![
            Field::new("d", DataType::Boolean, true),
            Field::new("b", DataType::Decimal128(14, 2), false),
            Field::new("a", DataType::Int64, false),
        ]);
        let lines: Vec<String> = drift(&published, &staged).iter().map(drift_line).collect();
        assert_eq!(
            lines,
            [
                "b: type changed decimal(12, 2) -> decimal(14, 2)",
                "b: nullability changed null -> not null",
                "c: missing (published as string null)",
                "d: extra (staged as boolean null)",
            ]
        );
        assert!(drift(&published, &published).is_empty());
        let reordered = Schema::new(vec![
            published.field(2).clone(),
            published.field(0).clone(),
            published.field(1).clone(),
        ]);
        assert!(drift(&published, &reordered).is_empty(), "order is free");
    }

    #[test]
    fn descriptions_tell_encodings_apart() {
        assert_eq!(describe(&DataType::LargeUtf8), "large_string");
        assert_eq!(
            describe(&ts(TimeUnit::Millisecond, Some("UTC"))),
            "timestamp(ms, 'UTC')"
        );
        assert_eq!(
            describe(&DataType::Dictionary(
                Box::new(DataType::Int32),
                Box::new(DataType::Utf8)
            )),
            "dictionary(int32, string)"
        );
    }
}
