//! Output for people on the real binary: colour by `--color` and
//! `NO_COLOR`, long sample values shortened with their length, and the JSON
//! beside them exact.

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;

use crate::support::repo;

const SALES_BAD: [&str; 6] = [
    "rules/daily_sales.dq",
    "--staged",
    "testdata/data/sales_bad",
    "--partition",
    "sales_date=2025-03-05",
    "--color",
];

/// `dqgate check` on the failing sample with `--color WHEN`, `NO_COLOR`
/// set or not, stdout a pipe (not a terminal).
fn check_coloured(when: &str, no_color: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
    cmd.arg("check")
        .args(SALES_BAD)
        .arg(when)
        .current_dir(repo())
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color");
    if let Some(v) = no_color {
        cmd.env("NO_COLOR", v);
    }
    cmd.output().expect("run dqgate")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn color_always_paints_the_marks_and_the_verdict_only() {
    let out = check_coloured("always", Some("1"));
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for painted in [
        "\x1b[32mok\x1b[0m    line 5 ",
        "\x1b[1;31mFAIL\x1b[0m  line 6 ",
        "\x1b[2mskip\x1b[0m  line 14 ",
        "\x1b[33mWARN\x1b[0m  line 15 ",
        "verdict: \x1b[1;31mFAIL\x1b[0m  (11 checks:",
    ] {
        assert!(text.contains(painted), "{painted:?} not in\n{text}");
    }
    let plain = stdout(&check_coloured("never", None));
    let stripped = text
        .replace("\x1b[0m", "")
        .replace("\x1b[32m", "")
        .replace("\x1b[1;31m", "")
        .replace("\x1b[33m", "")
        .replace("\x1b[2m", "");
    assert_eq!(stripped, plain, "colour changes nothing but the marks");
}

#[test]
fn color_auto_and_never_write_no_escape_codes_to_a_pipe() {
    for (when, no_color) in [("auto", None), ("auto", Some("1")), ("never", None)] {
        let text = stdout(&check_coloured(when, no_color));
        assert!(text.contains("FAIL  line 6 "), "{text}");
        assert!(
            !text.contains('\x1b'),
            "--color {when} {no_color:?}: {text}"
        );
    }
}

#[test]
fn color_applies_to_text_only() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
    let out = cmd
        .arg("check")
        .args(SALES_BAD)
        .args(["always", "--format", "json"])
        .current_dir(repo())
        .output()
        .unwrap();
    let json = stdout(&out);
    assert!(!json.contains('\x1b'));
    let expected = fs::read_to_string(repo().join("testdata/cases/sales_bad_json/stdout")).unwrap();
    // The golden case runs from its own directory: only the rule path differs.
    assert_eq!(
        json.replace(
            "\"rules/daily_sales.dq\"",
            "\"../../../rules/daily_sales.dq\""
        ),
        expected
    );
}

/// One file whose `code` column holds a 200-character value twice.
fn long_codes(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let long = "x".repeat(200);
    let schema = Arc::new(Schema::new(vec![Field::new("code", DataType::Utf8, true)]));
    let codes = StringArray::from(vec![long.as_str(), long.as_str(), "short"]);
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(codes)]).unwrap();
    let file = File::create(dir.join("part-0.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn long_sample_values_are_shortened_with_their_length() {
    let tmp = tempfile::tempdir().unwrap();
    long_codes(&tmp.path().join("staged"));
    fs::write(tmp.path().join("rules.dq"), "table t\ncheck unique(code)\n").unwrap();
    let run = |format: &str| {
        Command::new(env!("CARGO_BIN_EXE_dqgate"))
            .args([
                "check", "rules.dq", "--staged", "staged", "--format", format,
            ])
            .current_dir(tmp.path())
            .output()
            .unwrap()
    };
    let text = stdout(&run("text"));
    let shown = format!("code='{}…' (200 chars)  (2 rows)", "x".repeat(32));
    assert!(text.contains(&shown), "{text}");
    assert!(text.contains("input 1 file, 3 rows,"), "{text}");
    let markdown = stdout(&run("markdown"));
    assert!(markdown.contains("(200 chars)` × 2 rows"), "{markdown}");
    let json = stdout(&run("json"));
    assert!(
        json.contains(&"x".repeat(200)),
        "the JSON keeps the whole value"
    );
}
