//! The body of the `parse_check` fuzz target, shared with the stable test
//! that replays the corpus (`tests/it/fuzz_corpus.rs`), so that it compiles
//! and its regressions run in CI without a nightly toolchain.
//!
//! For any bytes: parsing, rendering the diagnostics and checking against a
//! fixed schema never panic; and a file that parses prints to text that
//! parses back to the same tree.

use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::prelude::SessionContext;
use dqgate::check::{check, CheckInput};
use dqgate::dsl::{parse, print};
use dqgate::runkey::RunKey;

thread_local! {
    static CTX: SessionContext = SessionContext::new();
}

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("sales_date", DataType::Date32, false),
        Field::new("store_id", DataType::Int32, true),
        Field::new("order_id", DataType::Int64, false),
        Field::new("customer_id", DataType::Int64, true),
        Field::new("sku", DataType::Utf8, true),
        Field::new("amount", DataType::Decimal128(12, 2), true),
        Field::new(
            "currency",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new(
            "order_ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("temperature", DataType::Float64, true),
        Field::new("order id", DataType::Int64, true),
    ])
}

pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (file, diags) = parse(text);
    let _ = dqgate::diagnostic::render("fuzz.dq", text, &diags);
    if !diags.is_empty() {
        return;
    }
    let printed = print::print(&file);
    let (again, diags) = parse(&printed);
    assert!(
        diags.is_empty(),
        "printed file does not parse:\n{printed}\n{diags:?}"
    );
    assert_eq!(
        print::normalized(&again),
        print::normalized(&file),
        "round trip changed:\n{printed}"
    );
    let keys: Vec<String> = file.partitioned_by.iter().map(|k| k.name.clone()).collect();
    let args: Vec<String> = keys.iter().map(|k| format!("{k}=2025-03-05")).collect();
    let run_key = RunKey::parse(&args, &keys).ok();
    let schema = schema();
    CTX.with(|ctx| {
        let result = check(&CheckInput {
            source: text,
            file: &file,
            schema: Some(&schema),
            run_key: run_key.as_ref(),
            references: &[],
            ctx,
        });
        if let Err(diags) = result {
            let _ = dqgate::diagnostic::render("fuzz.dq", text, &diags);
        }
    });
}
