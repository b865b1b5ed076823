//! What the staged data looks like, column by column: the observations a
//! suggested rule file is written from.
//!
//! The profile is measured with the audit's own machinery: its metrics are
//! planned as an [`AuditPlan`], the Parquet footers answer what they answer
//! exactly (row count, null counts, integer and date ranges), the rest of the
//! nulls and ranges is one fused aggregate over one scan, and each distinct
//! count runs where `check` runs it: on the key engine, one narrow pass over
//! its column, for integers, dates, timestamps and text ([`exec::observe`]).
//! Counting every column's distinct values inside the one fused aggregate
//! instead took three times as long (5M rows, 8 columns: 135-150 s against
//! 49 s, debug build on 2 busy cores), for the same text. Only the columns
//! that turn out to have few distinct values are read again, each alone, for
//! their values and how many rows carry each.

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;

use crate::check::Metric;
use crate::error::Error;
use crate::exec;
use crate::plan::{self, Atom, AuditPlan};
use crate::staged::StagedInput;
use crate::value::Value;

/// At most this many distinct values make a column's values a list.
pub const FEW_VALUES: u64 = 20;

/// What kind of values a column holds, as far as suggestions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Integer,
    /// Unsigned integers: never below 0.
    Unsigned,
    Decimal,
    Float,
    Text,
    Date,
    Timestamp,
    Boolean,
    Binary,
    /// Nested, half floats, times, intervals...: only their nulls are counted.
    Other,
}

impl Kind {
    pub fn of(ty: &DataType) -> Kind {
        use DataType as D;
        match ty {
            D::Dictionary(_, v) => Kind::of(v),
            D::Int8 | D::Int16 | D::Int32 | D::Int64 => Kind::Integer,
            D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => Kind::Unsigned,
            D::Decimal32(..) | D::Decimal64(..) | D::Decimal128(..) | D::Decimal256(..) => {
                Kind::Decimal
            }
            D::Float32 | D::Float64 => Kind::Float,
            D::Utf8 | D::LargeUtf8 | D::Utf8View => Kind::Text,
            D::Date32 | D::Date64 => Kind::Date,
            D::Timestamp(..) => Kind::Timestamp,
            D::Boolean => Kind::Boolean,
            D::Binary | D::LargeBinary | D::BinaryView => Kind::Binary,
            _ => Kind::Other,
        }
    }

    /// Numbers, dates and timestamps: a range says something.
    pub fn ranged(self) -> bool {
        matches!(
            self,
            Kind::Integer
                | Kind::Unsigned
                | Kind::Decimal
                | Kind::Float
                | Kind::Date
                | Kind::Timestamp
        )
    }

    /// Kinds a key or a list of values is made of.
    pub fn keylike(self) -> bool {
        matches!(
            self,
            Kind::Integer | Kind::Unsigned | Kind::Text | Kind::Date | Kind::Timestamp
        )
    }

    /// Whether the null count can be measured (nested columns are left out).
    pub fn counted(self) -> bool {
        self != Kind::Other
    }
}

/// One column as observed.
#[derive(Debug, Clone)]
pub struct Column {
    pub field: Field,
    pub kind: Kind,
    /// From a `key=value` directory, not from the files.
    pub hive: bool,
    /// `None` for a column whose nulls were not counted.
    pub nulls: Option<u64>,
    /// Distinct non-null values (key-like kinds only).
    pub distinct: Option<u64>,
    pub min: Option<Value>,
    pub max: Option<Value>,
    /// Each value with its rows, ascending, when there are few.
    pub values: Option<Vec<(Value, u64)>>,
}

impl Column {
    /// The values worth a `values ... in` list: few, each seen twice on
    /// average.
    pub fn listed(&self, rows: u64) -> Option<&[(Value, u64)]> {
        let values = self.values.as_deref()?;
        let n = values.len() as u64;
        ((1..=FEW_VALUES).contains(&n) && self.present(rows) >= 2 * n).then_some(values)
    }
}

impl Column {
    pub fn name(&self) -> &str {
        self.field.name()
    }

    /// Non-null values.
    pub fn present(&self, rows: u64) -> u64 {
        rows - self.nulls.unwrap_or(0)
    }

    /// Every non-null value occurs once, over at least two values.
    pub fn unique(&self, rows: u64) -> bool {
        let present = self.present(rows);
        self.kind.keylike() && present >= 2 && self.distinct == Some(present)
    }
}

/// The staged partition as observed.
#[derive(Debug, Clone)]
pub struct Profile {
    pub rows: u64,
    pub files: usize,
    pub fingerprint: String,
    pub columns: Vec<Column>,
    /// Passes over the data (0 when the footers answered everything).
    pub passes: usize,
}

/// Measures `input`: one fused pass (less what the footers answer), a key
/// engine pass per distinct count, then one narrow pass per column with few
/// distinct values.
pub async fn profile(ctx: &SessionContext, input: &StagedInput) -> Result<Profile, Error> {
    let hive: Vec<&str> = input.hive.iter().map(|f| f.name().as_str()).collect();
    let mut columns: Vec<Column> = input
        .schema
        .fields()
        .iter()
        .map(|f| Column {
            field: f.as_ref().clone(),
            kind: Kind::of(f.data_type()),
            hive: hive.contains(&f.name().as_str()),
            nulls: None,
            distinct: None,
            min: None,
            max: None,
            values: None,
        })
        .collect();
    let plan = AuditPlan::for_metrics(&metrics(&columns))
        .answer_from_footers(|a| exec::stats::answer(a, input))
        .key_strategies_from_footers(
            &input.schema,
            &|c| exec::stats::column_facts(input, c),
            None,
            None,
        );
    let obs = exec::observe(ctx, input, &plan).await?;
    let rows = input.row_count();
    let int = |a: &Atom| match obs.atoms.get(a) {
        Some(Value::Int(n)) => u64::try_from(*n).ok(),
        _ => None,
    };
    let value = |a: Atom| obs.atoms.get(&a).filter(|v| !v.is_null()).cloned();
    for c in &mut columns {
        let name = c.name().to_string();
        c.nulls = int(&Atom::NonNull(name.clone())).map(|n| rows - n);
        c.distinct = int(&Atom::Distinct(name.clone()));
        c.min = value(Atom::Min(name.clone()));
        c.max = value(Atom::Max(name));
    }
    let mut passes = plan.scans();
    for c in columns.iter_mut().filter(|c| few_values(c, rows)) {
        c.values = Some(values_of(ctx, input, c.name()).await?);
        passes += 1;
    }
    Ok(Profile {
        rows,
        files: input.files.len(),
        fingerprint: input.fingerprint.clone(),
        columns,
        passes,
    })
}

/// The metrics of the fused pass: nulls of every counted column, ranges of
/// ranged ones, distinct values of key-like ones.
fn metrics(columns: &[Column]) -> Vec<Metric> {
    let mut out = vec![Metric::RowCount];
    for c in columns.iter().filter(|c| c.kind.counted()) {
        let name = c.name().to_string();
        out.push(Metric::NullCount(name.clone()));
        if c.kind.ranged() {
            out.push(Metric::Min(name.clone()));
            out.push(Metric::Max(name.clone()));
        }
        if c.kind.keylike() {
            out.push(Metric::DistinctCount(name));
        }
    }
    out
}

/// A column whose values are read: few of them, each seen in more than
/// one row on average (a handful of rows with distinct values says
/// nothing), or one value (it may be the run key's).
fn few_values(c: &Column, rows: u64) -> bool {
    c.distinct
        .is_some_and(|d| d == 1 || ((1..=FEW_VALUES).contains(&d) && c.present(rows) >= 2 * d))
}

/// The distinct non-null values of `column` with their rows, ascending.
async fn values_of(
    ctx: &SessionContext,
    input: &StagedInput,
    column: &str,
) -> Result<Vec<(Value, u64)>, Error> {
    let frame = plan::distinct_frame(exec::table(ctx, input)?, column)
        .map_err(|e| Error::engine(format!("planning the values of `{column}`"), e))?;
    let batches = frame
        .collect()
        .await
        .map_err(|e| Error::engine(format!("reading the values of `{column}`"), e))?;
    let mut out = Vec::new();
    for b in &batches {
        let counts = b
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| Error::Audit(format!("the values of `{column}` have no row counts")))?;
        for i in 0..b.num_rows() {
            let s = ScalarValue::try_from_array(b.column(0), i)
                .map_err(|e| Error::engine(format!("reading a value of `{column}`"), e))?;
            let v = crate::scalar::from_scalar(&s).ok_or_else(|| {
                Error::Audit(format!("a value of `{column}` has no literal form"))
            })?;
            out.push((v, counts.value(i).max(0) as u64));
        }
    }
    out.sort_by(|a, b| {
        a.0.compare(&b.0)
            .unwrap_or_else(|| a.0.to_string().cmp(&b.0.to_string()))
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_dictionary_values() {
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        assert_eq!(Kind::of(&dict), Kind::Text);
        assert!(Kind::of(&DataType::Date32).ranged());
        assert!(!Kind::of(&DataType::Float64).keylike());
        assert!(!Kind::of(&DataType::new_list(DataType::Int32, true)).counted());
    }
}
