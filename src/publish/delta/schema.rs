//! The table's schema and protocol: created from the staged files on a first
//! publish, checked against them on every later one.

use deltalake_core::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake_core::kernel::StructType;
use deltalake_core::DeltaTable;
use serde_json::Value as Json;

use super::log::table_err;
use crate::publish::error::PublishError;
use crate::runkey::RunKey;

/// The table's schema for a first publish: the staged files' columns and
/// the partition columns as strings.
pub(super) fn table_schema(
    staged: &datafusion::arrow::datatypes::Schema,
    key: &RunKey,
) -> Result<StructType, PublishError> {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let mut fields: Vec<Field> = staged.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (col, value) in key.pairs() {
        check_partition_value(col, value)?;
        // Staged files that carry the partition column give it its type
        // (readers take the value from the log's partitionValues; the audit
        // has checked that the run key value is of that type); else it is a
        // string column.
        match staged.field_with_name(col).map(|f| f.data_type()) {
            Err(_) => fields.push(Field::new(col, DataType::Utf8, true)),
            Ok(
                DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Date32
                | DataType::Date64
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Boolean,
            ) => {}
            Ok(other) => {
                return Err(PublishError::Refused(format!(
                    "the partition column `{col}` is {other} in the staged files; the Delta target \
                     supports string, date, integer and boolean partition columns"
                )))
            }
        }
    }
    let schema = Schema::new(fields);
    (&schema).try_into_kernel().map_err(|e| {
        PublishError::Refused(format!("the staged schema cannot be a Delta schema: {e}"))
    })
}

/// Run-key values become directory names and relative URIs in the Delta
/// log (`add.path`); characters that Hive/Spark would escape or that a URI
/// would need to encode are refused rather than escaped differently from
/// Spark.
pub(super) fn check_partition_value(col: &str, value: &str) -> Result<(), PublishError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.+".contains(c);
    match value.chars().find(|&c| !ok(c)) {
        None => Ok(()),
        Some(c) => Err(PublishError::Refused(format!(
            "the run key value `{col}={value}` contains `{c}`: the Delta target accepts ASCII letters, \
             digits and - _ . + in partition values (no escaping yet)"
        ))),
    }
}

/// The oldest protocol that can hold `schema`: reader 1 / writer 2, or
/// reader 3 / writer 7 with the `timestampNtz` feature when a column is a
/// timestamp without time zone.
pub(super) fn protocol_for(schema: &StructType) -> Json {
    let ntz = serde_json::to_string(schema)
        .map(|s| s.contains("\"timestamp_ntz\""))
        .unwrap_or(false);
    if ntz {
        serde_json::json!({
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["timestampNtz"],
            "writerFeatures": ["timestampNtz"],
        })
    } else {
        serde_json::json!({"minReaderVersion": 1, "minWriterVersion": 2})
    }
}

/// An existing table must be partitioned like the rule file and have the
/// staged files' columns.
pub(super) fn check_compatible(
    table: &DeltaTable,
    partitioned_by: &[String],
    staged: &StructType,
) -> Result<(), PublishError> {
    check_partitioning(table, partitioned_by)?;
    let state = table.snapshot().map_err(|e| table_err(table, e))?;
    let have = state.schema();
    let names = |s: &StructType| -> Vec<(String, String)> {
        s.fields()
            .map(|f| (f.name().to_string(), format!("{:?}", f.data_type())))
            .collect()
    };
    if names(staged) != names(have.as_ref()) {
        return Err(PublishError::Refused(format!(
            "the staged files' columns differ from the Delta table's at `{}` (schema evolution is not supported)",
            table.table_url()
        )));
    }
    Ok(())
}

/// The table's partition columns, from its metadata.
pub(super) fn partition_columns(table: &DeltaTable) -> Result<Vec<String>, PublishError> {
    let state = table.snapshot().map_err(|e| table_err(table, e))?;
    Ok(serde_json::to_value(state.metadata())
        .ok()
        .and_then(|m| serde_json::from_value(m.get("partitionColumns")?.clone()).ok())
        .unwrap_or_default())
}

/// The table's partition columns must be the rule file's `partitioned by`.
pub(super) fn check_partitioning(
    table: &DeltaTable,
    partitioned_by: &[String],
) -> Result<(), PublishError> {
    let cols = partition_columns(table)?;
    if cols.as_slice() != partitioned_by {
        return Err(PublishError::Refused(format!(
            "the Delta table at `{}` is partitioned by [{}], the rule file by [{}]",
            table.table_url(),
            cols.join(", "),
            partitioned_by.join(", ")
        )));
    }
    Ok(())
}
