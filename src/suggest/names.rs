//! Names and types as a suggested rule file writes them.

use datafusion::arrow::datatypes::{DataType, TimeUnit};

use crate::dsl::parser::KEYWORDS;
use crate::dsl::print::is_plain;

/// Words of the language's statements that are not reserved, quoted all
/// the same when they name a column or the table (quoting is always
/// allowed), besides the reserved [`KEYWORDS`].
const WORDS: [&str; 9] = [
    "reference",
    "at",
    "across",
    "schema",
    "column",
    "is",
    "nulls",
    "history",
    "null",
];

fn word(lower: &str) -> bool {
    KEYWORDS.contains(&lower) || WORDS.contains(&lower)
}

/// SQL words quoted inside a condition (with [`WORDS`]).
const SQL_WORDS: [&str; 20] = [
    "select", "from", "or", "true", "false", "case", "when", "then", "else", "end", "like",
    "interval", "time", "order", "group", "user", "distinct", "all", "exists", "cast",
];

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A column or table name in the rule language: bare when it is a plain
/// identifier that is not one of its words, else in double quotes.
pub fn ident(name: &str) -> String {
    if is_plain(name) && !word(&name.to_ascii_lowercase()) {
        name.to_string()
    } else {
        quoted(name)
    }
}

/// A column name inside a SQL condition (`all(...)`).
pub fn sql_ident(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if is_plain(name) && !word(&lower) && !SQL_WORDS.contains(&lower.as_str()) {
        name.to_string()
    } else {
        quoted(name)
    }
}

/// A table name from a directory name: its identifier characters, `_` for
/// the others, never starting with a digit; `staged` when nothing is left.
pub fn table_name(dir: &str) -> String {
    let mut name: String = dir
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    name = name.trim_matches('_').to_string();
    if name.is_empty() {
        return "staged".into();
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "t_");
    }
    name
}

/// The type as `column C is TYPE` declares it (the canonical spelling of
/// docs/rule-language.md), or `None` for types the language cannot name.
pub fn declared(ty: &DataType) -> Option<String> {
    use DataType as D;
    let unit = |u: &TimeUnit| match u {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    };
    Some(match ty {
        D::Dictionary(_, v) => return declared(v),
        D::Boolean => "boolean".into(),
        D::Int8 => "int8".into(),
        D::Int16 => "int16".into(),
        D::Int32 => "int32".into(),
        D::Int64 => "int64".into(),
        D::UInt8 => "uint8".into(),
        D::UInt16 => "uint16".into(),
        D::UInt32 => "uint32".into(),
        D::UInt64 => "uint64".into(),
        D::Float32 => "float32".into(),
        D::Float64 => "float64".into(),
        D::Decimal32(p, s) | D::Decimal64(p, s) => format!("decimal({p}, {s})"),
        D::Decimal128(p, s) | D::Decimal256(p, s) => format!("decimal({p}, {s})"),
        D::Utf8 | D::LargeUtf8 | D::Utf8View => "string".into(),
        D::Binary | D::LargeBinary | D::BinaryView => "binary".into(),
        D::Date32 | D::Date64 => "date".into(),
        D::Time32(_) | D::Time64(_) => "time".into(),
        D::Timestamp(u, None) => format!("timestamp({})", unit(u)),
        D::Timestamp(u, Some(z)) if !z.contains('\'') => {
            format!("timestamp({}, '{z}')", unit(u))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_when_they_must_be() {
        assert_eq!(ident("order_id"), "order_id");
        assert_eq!(ident("order id"), "\"order id\"");
        assert_eq!(ident("date"), "\"date\"");
        assert_eq!(ident("Table"), "\"Table\"");
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(sql_ident("order"), "\"order\"");
        assert_eq!(sql_ident("sales_date"), "sales_date");
    }

    #[test]
    fn table_names_are_identifiers() {
        assert_eq!(table_name("sales_ok"), "sales_ok");
        assert_eq!(table_name("run-42"), "run_42");
        assert_eq!(table_name("2025"), "t_2025");
        assert_eq!(table_name("..."), "staged");
    }

    #[test]
    fn declared_types_use_the_canonical_words() {
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        assert_eq!(declared(&dict).unwrap(), "string");
        assert_eq!(
            declared(&DataType::Decimal128(12, 2)).unwrap(),
            "decimal(12, 2)"
        );
        assert_eq!(
            declared(&DataType::Timestamp(
                TimeUnit::Microsecond,
                Some("UTC".into())
            ))
            .unwrap(),
            "timestamp(us, 'UTC')"
        );
        assert!(declared(&DataType::new_list(DataType::Int32, true)).is_none());
    }
}
