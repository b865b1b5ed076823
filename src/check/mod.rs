//! Syntax tree + Arrow schema → [`CheckedRules`]: names resolved, types agreed,
//! SQL predicates planned, all before any data is read.
//!
//! The checker reports every problem of the file (unknown columns with a "did
//! you mean", type mismatches, bad literals, unknown run-key references) and
//! produces a rule set only when there is none.

mod across;
pub mod literal;
mod metric;
pub mod predicate;
pub mod rules;
mod statement;
mod threshold;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;

pub use across::common_key_type;
pub use rules::*;

use crate::diagnostic::{codes, Diagnostic, Span};
use crate::dsl::ast::{self};
use crate::runkey::RunKey;
use crate::value::Value;
use predicate::PartitionLookup;

/// What the checker needs besides the syntax tree.
pub struct CheckInput<'a> {
    /// The rule file's text (for line numbers and threshold texts).
    pub source: &'a str,
    pub file: &'a ast::RuleFile,
    /// The staged files' schema; `None` checks only what needs no data
    /// (`dqgate lint` without `--staged`).
    pub schema: Option<&'a Schema>,
    /// The run key, when known; `partition.KEY` values are typed from it.
    pub run_key: Option<&'a RunKey>,
    /// The schemas of the opened `reference` tables, by name; a reference
    /// missing here is checked by name only.
    pub references: &'a [(String, datafusion::arrow::datatypes::SchemaRef)],
    pub ctx: &'a SessionContext,
}

/// Checks a parsed rule file against a schema.
pub fn check(input: &CheckInput<'_>) -> Result<CheckedRules, Vec<Diagnostic>> {
    let mut checker = Checker::new(input);
    checker.declared_references();
    let statements: Vec<_> = input
        .file
        .statements
        .iter()
        .filter_map(|s| checker.statement(s))
        .collect();
    if !checker.diags.is_empty() || input.schema.is_none() {
        let mut diags = checker.diags;
        diags.sort_by_key(|d| d.span.start);
        return Err(diags);
    }
    Ok(CheckedRules {
        table: input.file.table.name.clone(),
        partitioned_by: input
            .file
            .partitioned_by
            .iter()
            .map(|i| i.name.clone())
            .collect(),
        statements,
    })
}

/// The kind of value a metric or threshold has, for comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    Text,
    Date,
    Timestamp,
    Bool,
    /// Unknown without a schema: compatible with everything.
    Any,
}

impl Kind {
    fn of_type(ty: &DataType) -> Option<Kind> {
        use DataType::*;
        Some(match ty {
            Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Float16 | Float32
            | Float64 | Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..) => {
                Kind::Number
            }
            Utf8 | LargeUtf8 | Utf8View => Kind::Text,
            Date32 | Date64 => Kind::Date,
            Timestamp(..) => Kind::Timestamp,
            Boolean => Kind::Bool,
            Dictionary(_, v) => return Kind::of_type(v),
            _ => return None,
        })
    }

    fn of_value(v: &Value) -> Kind {
        match v {
            Value::Int(_) | Value::Float(_) | Value::Decimal { .. } => Kind::Number,
            Value::Text(_) => Kind::Text,
            Value::Date(_) => Kind::Date,
            Value::Timestamp { .. } => Kind::Timestamp,
            Value::Bool(_) => Kind::Bool,
            Value::Null => Kind::Any,
        }
    }

    fn compatible(self, other: Kind) -> bool {
        self == Kind::Any || other == Kind::Any || self == other
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Number => "a number",
            Kind::Text => "text",
            Kind::Date => "a date",
            Kind::Timestamp => "a timestamp",
            Kind::Bool => "a boolean",
            Kind::Any => "a value",
        }
    }
}

/// A `partitioned by` column with its type and run-key value.
struct PartitionKey {
    name: String,
    ty: DataType,
    value: Option<Value>,
}

struct Checker<'a> {
    input: &'a CheckInput<'a>,
    keys: Vec<PartitionKey>,
    diags: Vec<Diagnostic>,
}

impl PartitionLookup for Checker<'_> {
    fn lookup(&self, key: &str) -> Option<(DataType, Option<ScalarValue>)> {
        let k = self.keys.iter().find(|k| k.name == key)?;
        let value = k.value.as_ref().map(|v| {
            let s = crate::scalar::to_scalar(v);
            s.cast_to(&k.ty).unwrap_or(s)
        });
        Some((k.ty.clone(), value))
    }
}

impl<'a> Checker<'a> {
    fn new(input: &'a CheckInput<'a>) -> Self {
        let mut diags = Vec::new();
        let mut keys: Vec<PartitionKey> = Vec::new();
        for id in &input.file.partitioned_by {
            if keys.iter().any(|k| k.name == id.name) {
                diags.push(Diagnostic::new(
                    codes::DUPLICATE_NAME,
                    id.span,
                    format!("`{}` is named twice in `partitioned by`", id.name),
                ));
                continue;
            }
            let ty = input
                .schema
                .and_then(|s| s.field_with_name(&id.name).ok())
                .map_or(DataType::Utf8, |f| f.data_type().clone());
            let value = match input.run_key.and_then(|rk| rk.get(&id.name)) {
                None => None,
                Some(raw) => match crate::scalar::parse_as(raw, &ty) {
                    Ok(v) => Some(v),
                    Err(why) => {
                        diags.push(Diagnostic::new(
                            codes::RUN_KEY,
                            id.span,
                            format!(
                                "--partition {}={raw}: {why}, the type of column `{}`",
                                id.name, id.name
                            ),
                        ));
                        None
                    }
                },
            };
            keys.push(PartitionKey {
                name: id.name.clone(),
                ty,
                value,
            });
        }
        Checker { input, keys, diags }
    }

    fn error(&mut self, code: &'static str, span: Span, msg: String) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    fn text(&self, span: Span) -> &'a str {
        self.input.source.get(span.start..span.end).unwrap_or("")
    }
}

/// Whitespace outside single-quoted strings collapsed to single spaces.
pub fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_string = false;
    let mut pending_space = false;
    for c in s.chars() {
        if !in_string && c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space && !out.is_empty() {
            out.push(' ');
        }
        pending_space = false;
        if c == '\'' {
            in_string = !in_string;
        }
        out.push(c);
    }
    out
}
