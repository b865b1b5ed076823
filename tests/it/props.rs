//! Property tests of the rule-file front end: for random rule files built
//! from the grammar, printing the syntax tree and parsing it again gives the
//! same tree; and no input, however mangled, makes the parser or the
//! checker panic.

use dqgate::diagnostic::Span;
use dqgate::dsl::ast::*;
use dqgate::dsl::{parse, print};
use proptest::prelude::*;

fn ident(name: &str) -> Ident {
    let plain = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    Ident {
        name: name.to_string(),
        span: Span::default(),
        quoted: !plain,
    }
}

fn column() -> impl Strategy<Value = Ident> {
    prop::sample::select(vec![
        "amount",
        "store_id",
        "sku",
        "order id",
        "Größe",
        "x_1",
        "say \"hi\"",
        "_c",
    ])
    .prop_map(ident)
}

fn predicate() -> impl Strategy<Value = Predicate> {
    prop::sample::select(vec![
        "amount > 100000",
        "lower(sku) LIKE 'a%'",
        "\"order id\" IS NOT NULL AND (store_id < 5 OR store_id > 10)",
        "sku <> 'O''Hara'",
        "length(sku) BETWEEN 2 AND 8",
    ])
    .prop_map(|sql| Predicate {
        sql: sql.to_string(),
        span: Span::default(),
        partition_refs: vec![],
    })
}

fn metric() -> impl Strategy<Value = Metric> {
    let kind = prop_oneof![
        Just(MetricKind::RowCount),
        column().prop_map(MetricKind::NullCount),
        column().prop_map(MetricKind::NullRate),
        column().prop_map(MetricKind::DistinctCount),
        prop::collection::vec(column(), 1..3).prop_map(MetricKind::DuplicateCount),
        column().prop_map(MetricKind::Min),
        column().prop_map(MetricKind::Max),
        column().prop_map(MetricKind::Sum),
        column().prop_map(MetricKind::Avg),
        predicate().prop_map(MetricKind::CountWhere),
        predicate().prop_map(MetricKind::RateWhere),
        (prop::collection::vec(column(), 1..3), nulls())
            .prop_map(|(keys, n)| MetricKind::DuplicateCountNulls(keys, n)),
    ];
    kind.prop_map(|kind| Metric {
        kind,
        span: Span::default(),
    })
}

fn nulls() -> impl Strategy<Value = Nulls> {
    prop::sample::select(vec![Nulls::Distinct, Nulls::NotDistinct])
}

fn declared_type() -> impl Strategy<Value = DeclaredType> {
    prop_oneof![
        prop::sample::select(vec![
            DeclaredType::Boolean,
            DeclaredType::Int8,
            DeclaredType::Int16,
            DeclaredType::Int32,
            DeclaredType::Int64,
            DeclaredType::UInt8,
            DeclaredType::UInt16,
            DeclaredType::UInt32,
            DeclaredType::UInt64,
            DeclaredType::Float32,
            DeclaredType::Float64,
            DeclaredType::String,
            DeclaredType::Binary,
            DeclaredType::Date,
            DeclaredType::Time,
        ]),
        (1u8..=76, 0i8..=10).prop_map(|(precision, s)| DeclaredType::Decimal {
            precision,
            scale: s.min(precision as i8),
        }),
        (
            prop::option::of(prop::sample::select(vec!["s", "ms", "us", "ns"])),
            prop::option::of(prop::sample::select(vec![
                "UTC",
                "Europe/Berlin",
                "+01:00",
                "it's"
            ])),
        )
            .prop_map(|(unit, tz)| DeclaredType::Timestamp {
                unit: unit.map(String::from),
                tz: unit.and(tz).map(String::from),
            }),
    ]
}

fn history_stat() -> impl Strategy<Value = HistoryStat> {
    prop::sample::select(HistoryStat::ALL.to_vec())
}

fn literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        (0u64..10_000_000, any::<bool>()).prop_map(|(n, percent)| Literal::Number {
            text: n.to_string(),
            percent
        }),
        (0u32..100_000, 1u32..5, any::<bool>()).prop_map(|(n, d, percent)| Literal::Number {
            text: format!("{}.{:0width$}", n / 10, n % 10, width = d as usize),
            percent
        }),
        prop::sample::select(vec!["EUR", "O'Hara", "", "a b", "Zürich"])
            .prop_map(|s| Literal::String(s.into())),
        Just(Literal::Date("2025-03-05".into())),
        Just(Literal::Timestamp("2025-03-05 12:00:00.250".into())),
    ]
}

fn value() -> impl Strategy<Value = ValueExpr> {
    let leaf = prop_oneof![
        4 => literal().prop_map(ValueKind::Literal),
        1 => prop::sample::select(vec!["sales_date", "day"]).prop_map(|k| ValueKind::PartitionRef(ident(k))),
        1 => metric().prop_map(|m| ValueKind::PublishedRef(Box::new(m))),
        1 => (history_stat(), 1u32..=1000, metric()).prop_map(|(stat, n, m)| ValueKind::History {
            stat,
            n,
            metric: Box::new(m),
        }),
    ]
    .prop_map(|kind| ValueExpr {
        kind,
        span: Span::default(),
    });
    leaf.prop_recursive(3, 12, 2, |inner| {
        let op = prop::sample::select(vec![ArithOp::Add, ArithOp::Sub, ArithOp::Mul, ArithOp::Div]);
        prop_oneof![
            (op, inner.clone(), inner.clone()).prop_map(|(op, l, r)| ValueKind::Binary {
                op,
                lhs: Box::new(l),
                rhs: Box::new(r)
            }),
            inner.prop_map(|v| ValueKind::Neg(Box::new(v))),
        ]
        .prop_map(|kind| ValueExpr {
            kind,
            span: Span::default(),
        })
    })
}

fn comparison() -> impl Strategy<Value = Comparison> {
    let op = prop::sample::select(vec![
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ]);
    prop_oneof![
        (op, value()).prop_map(|(op, rhs)| Comparison::Op { op, rhs }),
        (value(), value()).prop_map(|(low, high)| Comparison::Between { low, high }),
    ]
}

fn assertion() -> impl Strategy<Value = Assertion> {
    let s = Span::default();
    prop_oneof![
        3 => (metric(), comparison()).prop_map(|(metric, cmp)| Assertion::Compare { metric, cmp }),
        1 => prop::collection::vec(column(), 1..4).prop_map(move |keys| Assertion::Unique { keys, span: s }),
        1 => prop::collection::vec(column(), 1..4).prop_map(move |keys| Assertion::PrimaryKey { keys, span: s }),
        1 => (column(), any::<bool>(), prop::collection::vec(literal(), 1..4)).prop_map(move |(column, negated, list)| {
            Assertion::Values {
                column,
                negated,
                list: list
                    .into_iter()
                    .map(|l| ValueExpr { kind: ValueKind::Literal(l), span: s })
                    .collect(),
                span: s,
            }
        }),
        1 => predicate().prop_map(move |predicate| Assertion::All { predicate, span: s }),
        1 => (prop::collection::vec(column(), 1..4), nulls())
            .prop_map(move |(keys, nulls)| Assertion::UniqueNulls { keys, nulls, span: s }),
        1 => Just(Assertion::SchemaMatches { span: s }),
        1 => (column(), declared_type(), prop::option::of(any::<bool>())).prop_map(move |(column, ty, nullable)| {
            Assertion::ColumnType {
                column,
                ty: TypeSpec { ty, span: s },
                nullable,
                span: s,
            }
        }),
        1 => (prop::collection::vec(column(), 1..3), reference_name(), prop::collection::vec(column(), 1..3))
            .prop_map(move |(columns, reference, ref_columns)| Assertion::InReference {
                columns,
                reference,
                ref_columns,
                span: s,
            }),
        1 => prop::collection::vec(column(), 1..4)
            .prop_map(move |keys| Assertion::UniqueAcrossPublished { keys, span: s }),
    ]
}

fn reference_name() -> impl Strategy<Value = Ident> {
    prop::sample::select(vec!["stores", "dim stores", "r_2"]).prop_map(ident)
}

fn reference() -> impl Strategy<Value = Reference> {
    (
        reference_name(),
        prop::sample::select(vec!["warehouse/dim_stores", "O'Hara.parquet", "/abs/x y"]),
    )
        .prop_map(|(name, path)| Reference {
            name,
            path: path.to_string(),
            path_span: Span::default(),
            span: Span::default(),
        })
}

fn rule_file() -> impl Strategy<Value = RuleFile> {
    let statement = (
        prop::sample::select(vec![Severity::Check, Severity::Warn]),
        assertion(),
        prop::option::of(prop::sample::select(vec![
            "no sudden drop",
            "it's fine",
            "x",
        ])),
    )
        .prop_map(|(severity, assertion, label)| Statement {
            severity,
            assertion,
            label: label.map(String::from),
            source_text: String::new(),
            span: Span::default(),
        });
    (
        prop::collection::vec(
            prop::sample::select(vec!["sales_date", "day", "region id"]),
            0..3,
        ),
        prop::collection::vec(reference(), 0..3),
        prop::collection::vec(statement, 0..8),
    )
        .prop_map(|(keys, references, statements)| {
            let mut partitioned_by: Vec<Ident> = Vec::new();
            for k in keys {
                if !partitioned_by.iter().any(|p| p.name == k) {
                    partitioned_by.push(ident(k));
                }
            }
            RuleFile {
                table: ident("daily_sales"),
                partitioned_by,
                references,
                statements,
            }
        })
}

/// Runs the checker against a fixed schema; it may reject, never panic.
fn check_against_schema(source: &str, file: &RuleFile) {
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    let schema = Schema::new(vec![
        Field::new("amount", DataType::Decimal128(12, 2), true),
        Field::new("store_id", DataType::Int32, true),
        Field::new("sku", DataType::Utf8, true),
        Field::new("order id", DataType::Int64, true),
        Field::new("sales_date", DataType::Date32, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ]);
    let ctx = datafusion::prelude::SessionContext::new();
    let keys: Vec<String> = file
        .partitioned_by
        .iter()
        .map(|k| format!("{}=2025-03-05", k.name))
        .collect();
    let names: Vec<String> = file.partitioned_by.iter().map(|k| k.name.clone()).collect();
    let run_key = dqgate::runkey::RunKey::parse(&keys, &names).ok();
    let _ = dqgate::check::check(&dqgate::check::CheckInput {
        source,
        file,
        schema: Some(&schema),
        run_key: run_key.as_ref(),
        references: &[],
        ctx: &ctx,
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn print_then_parse_gives_the_same_tree(file in rule_file()) {
        let text = print::print(&file);
        let (parsed, diags) = parse(&text);
        prop_assert!(diags.is_empty(), "printed file does not parse:\n{text}\n{diags:?}");
        prop_assert_eq!(print::normalized(&parsed), print::normalized(&file), "\n{}", text);
    }

    #[test]
    fn mangled_files_never_panic(file in rule_file(), cut in any::<prop::sample::Index>(), junk in "[()'\"#%.,=<>!a-z0-9 \n\t-]{0,12}") {
        let text = print::print(&file);
        let at = cut.index(text.len() + 1);
        let at = (0..=at).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        let mangled = format!("{}{junk}{}", &text[..at], &text[at..]);
        for source in [mangled.as_str(), &text[..at], text.as_str()] {
            let (file, diags) = parse(source);
            if diags.is_empty() {
                check_against_schema(source, &file);
            }
        }
    }
}
