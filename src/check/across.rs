//! Checking the statements that look beyond the staged partition:
//! `reference` declarations, `values(c, ...) in NAME(r, ...)` (names, arity
//! and comparable key types on both sides) and `unique(k, ...) across
//! published`.

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;

use super::{quote_ident, Checker, Kind, RefLookup};
use crate::diagnostic::{codes, suggest, Diagnostic, Span};
use crate::dsl::ast::Ident;

impl Checker<'_> {
    /// Reports reference names declared twice.
    pub(super) fn declared_references(&mut self) {
        let refs = &self.input.file.references;
        for (i, r) in refs.iter().enumerate() {
            if let Some(first) = refs[..i].iter().find(|p| p.name.name == r.name.name) {
                let (line, _) = crate::diagnostic::line_col(self.input.source, first.span.start);
                self.error(
                    codes::DUPLICATE_NAME,
                    r.name.span,
                    format!(
                        "reference `{}` is already declared on line {line}",
                        r.name.name
                    ),
                );
            }
        }
    }

    /// `values(columns) in reference(ref_columns)`.
    pub(super) fn in_reference(
        &mut self,
        columns: &[Ident],
        reference: &Ident,
        ref_columns: &[Ident],
    ) -> Option<RefLookup> {
        let staged = self.keys(columns);
        let declared = self.reference_declared(reference);
        if ref_columns.len() != columns.len() {
            let span = ref_columns[0]
                .span
                .to(ref_columns[ref_columns.len() - 1].span);
            self.error(
                codes::TYPE,
                span,
                format!(
                    "`values(...)` names {} column(s) but `{}(...)` names {}: the key parts are compared pairwise",
                    columns.len(),
                    reference.name,
                    ref_columns.len()
                ),
            );
            return None;
        }
        let (staged, ()) = (staged?, declared?);
        let key_types = self.key_types(columns, reference, ref_columns)?;
        Some(RefLookup {
            columns: staged,
            reference: reference.name.clone(),
            ref_columns: ref_columns.iter().map(|c| c.name.clone()).collect(),
            key_types,
        })
    }

    fn reference_declared(&mut self, reference: &Ident) -> Option<()> {
        let refs = &self.input.file.references;
        if refs.iter().any(|r| r.name.name == reference.name) {
            return Some(());
        }
        let names: Vec<&str> = refs.iter().map(|r| r.name.name.as_str()).collect();
        let help = match suggest(&reference.name, names.iter().copied()) {
            Some(s) => format!("did you mean `{}`?", quote_ident(s)),
            None => format!(
                "declare it after the header: reference {} at 'path/to/table'",
                quote_ident(&reference.name)
            ),
        };
        self.diags.push(
            Diagnostic::new(
                codes::UNKNOWN_REFERENCE,
                reference.span,
                format!("unknown reference `{}`", reference.name),
            )
            .with_help(help),
        );
        None
    }

    /// The type each key pair is compared in; reports unknown reference
    /// columns and incomparable types. Empty when a schema is unknown.
    fn key_types(
        &mut self,
        columns: &[Ident],
        reference: &Ident,
        ref_columns: &[Ident],
    ) -> Option<Vec<DataType>> {
        let (Some(staged), Some((_, schema))) = (
            self.input.schema,
            self.input
                .references
                .iter()
                .find(|(n, _)| *n == reference.name),
        ) else {
            return Some(Vec::new());
        };
        let mut types = Some(Vec::new());
        for (c, r) in columns.iter().zip(ref_columns) {
            let Ok(field) = schema.field_with_name(&r.name) else {
                let names = schema.fields().iter().map(|f| f.name().as_str());
                let help = match suggest(&r.name, names) {
                    Some(s) => format!("did you mean `{}`?", quote_ident(s)),
                    None => {
                        let all: Vec<_> = schema
                            .fields()
                            .iter()
                            .map(|f| quote_ident(f.name()))
                            .collect();
                        format!("the reference has the columns {}", all.join(", "))
                    }
                };
                self.diags.push(
                    Diagnostic::new(
                        codes::UNKNOWN_COLUMN,
                        r.span,
                        format!(
                            "unknown column `{}` in reference `{}`",
                            r.name, reference.name
                        ),
                    )
                    .with_help(help),
                );
                types = None;
                continue;
            };
            let Ok(left) = staged.field_with_name(&c.name) else {
                types = None; // already reported
                continue;
            };
            match common_key_type(left.data_type(), field.data_type()) {
                Some(t) => {
                    if let Some(v) = types.as_mut() {
                        v.push(t)
                    }
                }
                None => {
                    self.type_mismatch(c, left.data_type(), reference, r, field.data_type());
                    types = None;
                }
            }
        }
        types
    }

    fn type_mismatch(
        &mut self,
        c: &Ident,
        left: &DataType,
        reference: &Ident,
        r: &Ident,
        right: &DataType,
    ) {
        let d = Diagnostic::new(
            codes::TYPE,
            r.span,
            format!(
                "key type mismatch: `{}` is {left} in the staged files but `{}` is {right} in reference `{}`",
                c.name, r.name, reference.name
            ),
        )
        .with_help("key parts are compared pairwise and must both be numbers, text, dates or timestamps");
        self.diags.push(d);
    }

    /// `unique(keys) across published`: the key columns, and a table that
    /// has partitions to compare with.
    pub(super) fn across_published(&mut self, keys: &[Ident], span: Span) -> Option<Vec<String>> {
        let k = self.keys(keys);
        if self.input.file.partitioned_by.is_empty() {
            self.diags.push(
                Diagnostic::new(
                    codes::NOT_PARTITIONED,
                    span,
                    "`across published` compares with the table's other partitions, but this rule file has no `partitioned by`",
                )
                .with_help("name the run-key columns after the table: `partitioned by KEY`"),
            );
            return None;
        }
        k
    }
}

/// The type two key columns are compared in: both must be of the same kind
/// (numbers, text, dates, timestamps, booleans) and have a common type.
pub fn common_key_type(left: &DataType, right: &DataType) -> Option<DataType> {
    let (l, r) = (value_type(left), value_type(right));
    let kind = Kind::of_type(l)?;
    if Kind::of_type(r) != Some(kind) {
        return None;
    }
    if l == r {
        return Some(l.clone());
    }
    comparison_coercion(l, r)
}

fn value_type(t: &DataType) -> &DataType {
    match t {
        DataType::Dictionary(_, v) => value_type(v),
        t => t,
    }
}

#[cfg(test)]
mod tests {
    use super::common_key_type as common_type;
    use datafusion::arrow::datatypes::DataType::*;

    #[test]
    fn common_types() {
        assert_eq!(common_type(&Int32, &Int64), Some(Int64));
        assert_eq!(common_type(&Int64, &Int64), Some(Int64));
        assert_eq!(
            common_type(&Dictionary(Box::new(Int32), Box::new(Utf8)), &Utf8),
            Some(Utf8)
        );
        assert_eq!(common_type(&Int32, &Utf8), None);
        assert_eq!(common_type(&Date32, &Int32), None);
        assert!(common_type(&Decimal128(12, 2), &Decimal128(10, 0)).is_some());
    }
}
