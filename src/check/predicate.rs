//! SQL predicates (`all(P)`, `count(where P)`) → DataFusion expressions.
//!
//! The predicate text goes to DataFusion's own SQL parser and planner; dqgate
//! only substitutes `partition.KEY` references by typed placeholders first, and
//! turns DataFusion's errors into rule-file diagnostics with a span.

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ScalarValue, SchemaError};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{Expr, ExprSchemable};
use datafusion::prelude::{lit, SessionContext};

use crate::diagnostic::{codes, suggest, Diagnostic, Span};
use crate::dsl::ast::Predicate;

const PLACEHOLDER: &str = "__dqgate_partition__";

/// Resolves `partition.KEY` inside predicates: the key's type and, when the
/// run key is known, its value.
pub trait PartitionLookup {
    /// `None` when `key` is not a `partitioned by` column.
    fn lookup(&self, key: &str) -> Option<(DataType, Option<ScalarValue>)>;
}

/// Plans a predicate against `schema`. The result is boolean-typed and has no
/// placeholder left.
pub fn plan_predicate(
    ctx: &SessionContext,
    schema: &Schema,
    pred: &Predicate,
    partition: &dyn PartitionLookup,
) -> Result<Expr, Vec<Diagnostic>> {
    if pred.sql.trim().is_empty() {
        return Err(vec![Diagnostic::new(
            codes::SYNTAX,
            pred.span,
            "empty predicate",
        )]);
    }
    if let Some(&at) = member_accesses(&pred.sql).get(MAX_MEMBER_ACCESSES) {
        let start = pred.span.start + at;
        return Err(vec![Diagnostic::new(
            codes::SYNTAX,
            Span::new(start, start + 1),
            format!(
                "more than {MAX_MEMBER_ACCESSES} `.` field accesses in one condition: the SQL parser's time grows exponentially with them; split the condition"
            ),
        )]);
    }
    let (sql, placeholders) = substitute_refs(pred, partition)?;
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (name, ty, _) in &placeholders {
        fields.push(Field::new(name, ty.clone(), true));
    }
    let with_refs =
        DFSchema::try_from(Schema::new(fields)).map_err(|e| vec![engine_diag(pred, schema, &e)])?;
    let plain =
        DFSchema::try_from(schema.clone()).map_err(|e| vec![engine_diag(pred, schema, &e)])?;
    let expr = ctx
        .parse_sql_expr(&sql, &with_refs)
        .map_err(|e| vec![engine_diag(pred, schema, &e)])?;
    let expr = expr
        .transform(|e| match &e {
            Expr::Column(c) if c.relation.is_none() => {
                match placeholders.iter().find(|(n, _, _)| *n == c.name) {
                    Some((_, ty, value)) => {
                        let v = match value {
                            Some(v) => v.clone(),
                            None => ScalarValue::try_from(ty)?,
                        };
                        Ok(Transformed::yes(lit(v)))
                    }
                    None => Ok(Transformed::no(e)),
                }
            }
            _ => Ok(Transformed::no(e)),
        })
        .map_err(|e| vec![engine_diag(pred, schema, &e)])?
        .data;
    let ty = expr
        .get_type(&plain)
        .map_err(|e| vec![engine_diag(pred, schema, &e)])?;
    if !matches!(ty, DataType::Boolean | DataType::Null) {
        return Err(vec![Diagnostic::new(
            codes::TYPE,
            pred.span,
            format!("a predicate must be true or false, but this is of type {ty}"),
        )]);
    }
    // Type coercion and function signatures are checked when the physical
    // expression is built: still no data read.
    ctx.create_physical_expr(expr.clone(), &plain)
        .map_err(|e| vec![engine_diag(pred, schema, &e)])?;
    Ok(expr)
}

type Placeholder = (String, DataType, Option<ScalarValue>);

fn substitute_refs(
    pred: &Predicate,
    partition: &dyn PartitionLookup,
) -> Result<(String, Vec<Placeholder>), Vec<Diagnostic>> {
    let mut refs: Vec<_> = pred.partition_refs.iter().collect();
    refs.sort_by_key(|(_, span)| span.start);
    let mut sql = String::new();
    let mut at = 0;
    let mut placeholders: Vec<Placeholder> = Vec::new();
    let mut diags = Vec::new();
    for (key, span) in refs {
        let Some((ty, value)) = partition.lookup(&key.name) else {
            diags.push(
                Diagnostic::new(
                    codes::UNKNOWN_PARTITION_KEY,
                    *span,
                    format!(
                        "`partition.{}` is not a run-key column of this rule file",
                        key.name
                    ),
                )
                .with_help("run-key columns are the ones named by `partitioned by`"),
            );
            continue;
        };
        let (start, end) = (span.start - pred.span.start, span.end - pred.span.start);
        if start < at || end > pred.sql.len() {
            continue;
        }
        let name = format!("{PLACEHOLDER}{}", key.name);
        sql.push_str(&pred.sql[at..start]);
        sql.push_str(&format!("\"{name}\""));
        at = end;
        if !placeholders.iter().any(|(n, _, _)| *n == name) {
            placeholders.push((name, ty, value));
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    sql.push_str(&pred.sql[at..]);
    Ok((sql, placeholders))
}

/// A DataFusion planning error as a diagnostic: unknown columns get the span
/// of the name and a suggestion; anything else spans the predicate.
fn engine_diag(pred: &Predicate, schema: &Schema, err: &DataFusionError) -> Diagnostic {
    if let Some(name) = unknown_field(err) {
        let names = schema.fields().iter().map(|f| f.name().as_str());
        let span = find_word(&pred.sql, &name)
            .map(|(s, e)| Span::new(pred.span.start + s, pred.span.start + e))
            .unwrap_or(pred.span);
        let mut diag = Diagnostic::new(
            codes::UNKNOWN_COLUMN,
            span,
            format!("unknown column `{name}` in predicate"),
        );
        if let Some(s) = suggest(&name, names) {
            diag = diag.with_help(format!("did you mean `{s}`?"));
        }
        return diag;
    }
    let msg = err.find_root().strip_backtrace();
    let msg = msg.replace(PLACEHOLDER, "partition.");
    Diagnostic::new(
        codes::PREDICATE,
        pred.span,
        format!("invalid predicate: {}", first_line(&msg)),
    )
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

fn unknown_field(err: &DataFusionError) -> Option<String> {
    let mut e = err;
    loop {
        match e {
            DataFusionError::SchemaError(boxed, _) => {
                if let SchemaError::FieldNotFound { field, .. } = boxed.as_ref() {
                    return Some(field.name.clone());
                }
                return None;
            }
            DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => e = inner,
            DataFusionError::Shared(inner) => e = inner,
            _ => return None,
        }
    }
}

/// The first occurrence of `word` in `sql` as a whole identifier, outside
/// single-quoted strings.
fn find_word(sql: &str, word: &str) -> Option<(usize, usize)> {
    let bytes = sql.as_bytes();
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\'' {
            in_string = !in_string;
        } else if !in_string && sql[i..].starts_with(word) {
            let before_ok = i == 0 || !is_ident_byte(bytes[i - 1]);
            let end = i + word.len();
            let after_ok = end >= bytes.len() || !is_ident_byte(bytes[end]);
            if before_ok && after_ok {
                return Some((i, end));
            }
        }
        i += 1;
        while i < bytes.len() && !sql.is_char_boundary(i) {
            i += 1;
        }
    }
    None
}

/// How many `a.b` field accesses a condition may hold. DataFusion's SQL
/// parser backtracks over each one, and with a `[` after them its time doubles
/// per access (found by fuzzing: 20 took 14 s). Struct paths in data-quality
/// conditions are short; `partition.KEY` does not count.
const MAX_MEMBER_ACCESSES: usize = 8;

/// Byte offsets of the `.` of every field access (`name.name`, `x].name`,
/// `"q".name`) outside string literals and quoted names, except in
/// `partition.KEY`.
fn member_accesses(sql: &str) -> Vec<usize> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut quote: Option<u8> = None;
    for (i, &c) in bytes.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'\'' || c == b'"' => quote = Some(c),
            None if c == b'.' => {
                let before = sql[..i].trim_end();
                let after = sql[i + 1..].trim_start();
                let joins_names = before
                    .bytes()
                    .next_back()
                    .is_some_and(|b| is_ident_byte(b) || b == b']' || b == b'"' || b == b')')
                    && after.bytes().next().is_some_and(|b| {
                        b.is_ascii_alphabetic() || b == b'_' || b == b'"' || b >= 0x80
                    });
                let number = before
                    .bytes()
                    .next_back()
                    .is_some_and(|b| b.is_ascii_digit())
                    && before
                        .bytes()
                        .rev()
                        .take_while(|b| is_ident_byte(*b))
                        .all(|b| b.is_ascii_digit());
                let partition_ref = before.ends_with("partition")
                    && !before[..before.len() - "partition".len()]
                        .bytes()
                        .next_back()
                        .is_some_and(is_ident_byte);
                if joins_names && !number && !partition_ref {
                    out.push(i);
                }
            }
            None => {}
        }
    }
    out
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_field_accesses_outside_strings_and_partition_refs() {
        assert_eq!(member_accesses("a.b.c > 1"), vec![1, 3]);
        assert_eq!(member_accesses("x[1].y and \"q\".z"), vec![4, 14]);
        assert!(member_accesses("'a.b.c' = s and \"d.e\" > 1.5").is_empty());
        assert!(member_accesses("d = partition.day and 2.e3 > 1").is_empty());
        assert_eq!(member_accesses("mypartition.x"), vec![11]);
    }

    #[test]
    fn finds_whole_words_outside_strings() {
        assert_eq!(find_word("x = 'amt' and amt > 0", "amt"), Some((14, 17)));
        assert_eq!(find_word("amount > 0", "amt"), None);
    }
}
