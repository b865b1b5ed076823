//! The type names of `column c is TYPE` declarations: the spellings an analyst
//! writes (SQL, Spark, DuckDB and Arrow names) and their canonical form.
//!
//! Resolution happens in the parser, so an unknown type name is a syntax error
//! with a caret even when no data is at hand (`dqgate lint`). Which Arrow
//! types of the staged files count as each declared type is decided by the
//! checker (`check::schema`).

use super::ast::DeclaredType;

/// Every accepted spelling without arguments, and what it means.
const SIMPLE: [(&str, DeclaredType); 30] = [
    ("boolean", DeclaredType::Boolean),
    ("bool", DeclaredType::Boolean),
    ("tinyint", DeclaredType::Int8),
    ("int8", DeclaredType::Int8),
    ("smallint", DeclaredType::Int16),
    ("int16", DeclaredType::Int16),
    ("int", DeclaredType::Int32),
    ("integer", DeclaredType::Int32),
    ("int32", DeclaredType::Int32),
    ("bigint", DeclaredType::Int64),
    ("long", DeclaredType::Int64),
    ("int64", DeclaredType::Int64),
    ("uint8", DeclaredType::UInt8),
    ("uint16", DeclaredType::UInt16),
    ("uint32", DeclaredType::UInt32),
    ("uint64", DeclaredType::UInt64),
    ("float", DeclaredType::Float32),
    ("real", DeclaredType::Float32),
    ("float32", DeclaredType::Float32),
    ("double", DeclaredType::Float64),
    ("float64", DeclaredType::Float64),
    ("string", DeclaredType::String),
    ("text", DeclaredType::String),
    ("varchar", DeclaredType::String),
    ("utf8", DeclaredType::String),
    ("binary", DeclaredType::Binary),
    ("bytes", DeclaredType::Binary),
    ("blob", DeclaredType::Binary),
    ("date", DeclaredType::Date),
    ("time", DeclaredType::Time),
];

/// Spellings that take arguments (or may: `timestamp`).
const WITH_ARGS: [&str; 3] = ["decimal", "numeric", "timestamp"];

/// Timestamp units: accepted spellings and the canonical one.
const UNITS: [(&str, &str); 8] = [
    ("s", "s"),
    ("second", "s"),
    ("ms", "ms"),
    ("millisecond", "ms"),
    ("us", "us"),
    ("microsecond", "us"),
    ("ns", "ns"),
    ("nanosecond", "ns"),
];

/// The largest decimal precision Arrow holds (`Decimal256`).
pub const MAX_PRECISION: u32 = 76;

/// An argument of a type name as written: a number, a word or a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeArg {
    Number(String),
    Word(String),
    Str(String),
}

/// Every type name, for suggestions and help texts.
pub fn names() -> impl Iterator<Item = &'static str> {
    SIMPLE.iter().map(|(n, _)| *n).chain(WITH_ARGS)
}

/// Whether `name` is a type name at all (with or without arguments).
pub fn is_type_name(name: &str) -> bool {
    names().any(|n| n == name)
}

/// What is wrong with a declared type, for a diagnostic at its name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    #[error("the type `{0}` takes no arguments")]
    NoArguments(String),
    #[error("unknown type `{0}`")]
    Unknown(String),
    #[error("`{0}` needs a precision and a scale, e.g. `{0}(12, 2)`")]
    DecimalUsage(String),
    #[error("decimal precision must be between 1 and {MAX_PRECISION}, not {0}")]
    Precision(u32),
    #[error("decimal scale {scale} is larger than the precision {precision}")]
    Scale { scale: u32, precision: u32 },
    #[error(
        "write `timestamp`, `timestamp(UNIT)` or `timestamp(UNIT, 'ZONE')` with UNIT one of s, ms, us, ns"
    )]
    TimestampUsage,
}

/// Resolves a type name and its arguments (`None`: no parentheses written).
/// The error says what is wrong, for a diagnostic at the name.
pub fn resolve(name: &str, args: Option<&[TypeArg]>) -> Result<DeclaredType, TypeError> {
    if let Some((_, ty)) = SIMPLE.iter().find(|(n, _)| *n == name) {
        return match args {
            None => Ok(ty.clone()),
            Some(_) => Err(TypeError::NoArguments(name.to_string())),
        };
    }
    match name {
        "decimal" | "numeric" => decimal(name, args),
        "timestamp" => timestamp(args.unwrap_or_default()),
        _ => Err(TypeError::Unknown(name.to_string())),
    }
}

fn decimal(name: &str, args: Option<&[TypeArg]>) -> Result<DeclaredType, TypeError> {
    let usage = || TypeError::DecimalUsage(name.to_string());
    let number = |a: &TypeArg| match a {
        TypeArg::Number(t) => t.parse::<u32>().ok(),
        _ => None,
    };
    let (p, s) = match args.unwrap_or_default() {
        [p] => (number(p), Some(0)),
        [p, s] => (number(p), number(s)),
        _ => return Err(usage()),
    };
    let (Some(precision), Some(scale)) = (p, s) else {
        return Err(usage());
    };
    if precision == 0 || precision > MAX_PRECISION {
        return Err(TypeError::Precision(precision));
    }
    if scale > precision {
        return Err(TypeError::Scale { scale, precision });
    }
    Ok(DeclaredType::Decimal {
        precision: precision as u8,
        scale: scale as i8,
    })
}

fn timestamp(args: &[TypeArg]) -> Result<DeclaredType, TypeError> {
    let usage = TypeError::TimestampUsage;
    let unit = |a: &TypeArg| match a {
        TypeArg::Word(w) => UNITS
            .iter()
            .find(|(n, _)| n == w)
            .map(|(_, c)| c.to_string()),
        _ => None,
    };
    match args {
        [] => Ok(DeclaredType::Timestamp {
            unit: None,
            tz: None,
        }),
        [u] => Ok(DeclaredType::Timestamp {
            unit: Some(unit(u).ok_or(TypeError::TimestampUsage)?),
            tz: None,
        }),
        [u, TypeArg::Str(tz)] if !tz.is_empty() => Ok(DeclaredType::Timestamp {
            unit: Some(unit(u).ok_or(TypeError::TimestampUsage)?),
            tz: Some(tz.clone()),
        }),
        _ => Err(usage),
    }
}

/// The canonical spelling, as the printer writes it and the verdict shows it.
pub fn canonical(ty: &DeclaredType) -> String {
    use DeclaredType as T;
    match ty {
        T::Boolean => "boolean".into(),
        T::Int8 => "int8".into(),
        T::Int16 => "int16".into(),
        T::Int32 => "int32".into(),
        T::Int64 => "int64".into(),
        T::UInt8 => "uint8".into(),
        T::UInt16 => "uint16".into(),
        T::UInt32 => "uint32".into(),
        T::UInt64 => "uint64".into(),
        T::Float32 => "float32".into(),
        T::Float64 => "float64".into(),
        T::Decimal { precision, scale } => format!("decimal({precision}, {scale})"),
        T::String => "string".into(),
        T::Binary => "binary".into(),
        T::Date => "date".into(),
        T::Time => "time".into(),
        T::Timestamp { unit, tz } => match (unit, tz) {
            (None, _) => "timestamp".into(),
            (Some(u), None) => format!("timestamp({u})"),
            (Some(u), Some(z)) => format!("timestamp({u}, '{}')", z.replace('\'', "''")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(t: &str) -> TypeArg {
        TypeArg::Number(t.into())
    }

    #[test]
    fn spellings_resolve_to_canonical_names() {
        for (name, want) in [
            ("int", "int32"),
            ("bigint", "int64"),
            ("double", "float64"),
            ("float", "float32"),
            ("text", "string"),
            ("utf8", "string"),
            ("bool", "boolean"),
            ("timestamp", "timestamp"),
        ] {
            assert_eq!(canonical(&resolve(name, None).unwrap()), want, "{name}");
        }
        let d = resolve("numeric", Some(&[n("12"), n("2")])).unwrap();
        assert_eq!(canonical(&d), "decimal(12, 2)");
        let d = resolve("decimal", Some(&[n("9")])).unwrap();
        assert_eq!(canonical(&d), "decimal(9, 0)");
        let t = resolve(
            "timestamp",
            Some(&[
                TypeArg::Word("millisecond".into()),
                TypeArg::Str("UTC".into()),
            ]),
        )
        .unwrap();
        assert_eq!(canonical(&t), "timestamp(ms, 'UTC')");
    }

    #[test]
    fn bad_types_say_why() {
        assert_eq!(
            resolve("strin", None).unwrap_err().to_string(),
            "unknown type `strin`"
        );
        assert!(resolve("decimal", None)
            .unwrap_err()
            .to_string()
            .contains("precision"));
        assert!(resolve("decimal", Some(&[n("80"), n("2")]))
            .unwrap_err()
            .to_string()
            .contains("between 1 and 76"));
        assert!(resolve("decimal", Some(&[n("4"), n("6")]))
            .unwrap_err()
            .to_string()
            .contains("larger than the precision"));
        assert!(resolve("int", Some(&[n("4")]))
            .unwrap_err()
            .to_string()
            .contains("no arguments"));
        assert!(resolve("timestamp", Some(&[TypeArg::Word("hours".into())]))
            .unwrap_err()
            .to_string()
            .contains("UNIT"));
    }
}
