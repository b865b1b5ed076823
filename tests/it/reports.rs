//! Reports on the real binary and fixtures: `--format junit` and
//! `--format markdown` (beside their golden cases), `dqgate report` over
//! saved verdicts and a really published table, and the shell recipe
//! `docs/recipes/gate.sh` (pass publishes, fail leaves the table untouched).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{data, dqgate, repo};

const RECIPE_RULES: &str = "docs/recipes/daily_sales.dq";
const FILES: [&str; 3] = [
    "part-00000.parquet",
    "part-00001.parquet",
    "batch=2/part-00002.parquet",
];

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Copies a fixture's data files (not its Spark leftovers) to `dst`.
fn stage(fixture: &str, files: &[&str], dst: &Path) -> PathBuf {
    for f in files {
        let to = dst.join(f);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(data(fixture).join(f), to).unwrap();
    }
    dst.to_path_buf()
}

fn attr_count(doc: &str, element: &str, attr: &str) -> usize {
    let start = doc.find(&format!("<{element} ")).expect(element);
    let tail = &doc[start..];
    let key = format!(" {attr}=\"");
    let at = tail.find(&key).expect(attr) + key.len();
    tail[at..tail[at..].find('"').unwrap() + at]
        .parse()
        .unwrap()
}

#[test]
fn junit_has_one_testcase_per_check_and_keeps_the_exit_code() {
    let out = dqgate(
        &repo(),
        &[
            "check",
            "rules/daily_sales.dq",
            "--staged",
            "testdata/data/sales_bad",
            "--partition",
            "sales_date=2025-03-05",
            "--format",
            "junit",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let doc = stdout(&out);
    assert!(doc.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites "));
    assert_eq!(doc.matches("<testcase ").count(), 11);
    assert_eq!(attr_count(&doc, "testsuite", "tests"), 11);
    assert_eq!(attr_count(&doc, "testsuite", "failures"), 8);
    assert_eq!(doc.matches("<failure ").count(), 8);
    assert_eq!(attr_count(&doc, "testsuite", "skipped"), 1);
    assert_eq!(doc.matches("<skipped ").count(), 1);
    assert_eq!(attr_count(&doc, "testsuite", "errors"), 0);
    // Value and expectation in the message, samples in the body.
    assert!(doc.contains(
        "<failure type=\"check\" message=\"duplicate_count(order_id) = 3  (expected = 0)\">"
    ));
    assert!(doc.contains("samples:\n  order_id=1000700  (3 rows)\n"));
    // A warning passes, and says so.
    assert!(doc.contains("<system-out>WARNING: does not hold"));
    // Nothing from the clock or the host.
    for word in ["timestamp=", "hostname="] {
        assert!(!doc.contains(word), "{word} in JUnit output");
    }
    assert_eq!(doc.matches("time=\"0\"").count(), 2 + 11);

    let ok = dqgate(
        &repo(),
        &[
            "check",
            "rules/daily_sales.dq",
            "--staged",
            "testdata/data/sales_ok",
            "--partition",
            "sales_date=2025-03-05",
            "--format",
            "junit",
        ],
    );
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(attr_count(&stdout(&ok), "testsuite", "failures"), 0);
}

#[test]
fn junit_and_markdown_errors_keep_exit_codes() {
    for (format, marker) in [("junit", "<error type=\"error\""), ("markdown", "ERROR")] {
        let out = dqgate(
            &repo(),
            &[
                "check",
                "rules/daily_sales.dq",
                "--staged",
                "testdata/data/absent",
                "--partition",
                "sales_date=2025-03-05",
                "--format",
                format,
            ],
        );
        assert_eq!(out.status.code(), Some(3), "{format}");
        assert!(stdout(&out).contains(marker), "{format}: {}", stdout(&out));
        assert!(stdout(&out).contains("data/absent"));
    }
}

/// Every table row of the Markdown report has exactly the seven cell
/// delimiters of its six columns, whatever the names and values held.
#[test]
fn markdown_rows_keep_their_cells() {
    let out = dqgate(
        &repo().join("testdata/cases/escape_markdown"),
        &[
            "check",
            "rules.dq",
            "--staged",
            "../../data/sales_bad",
            "--partition",
            "sales_date=2025-03-05",
            "--format",
            "markdown",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let md = stdout(&out);
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(rows.len(), 2 + 3);
    for row in rows {
        let bytes = row.as_bytes();
        let cells = (0..bytes.len())
            .filter(|&i| bytes[i] == b'|' && (i == 0 || bytes[i - 1] != b'\\'))
            .count();
        assert_eq!(cells, 7, "{row}");
    }
    assert!(md.contains("`` pipes \\| in a label, <b>markup</b> & `ticks` ``"));
}

/// A table with history: four published days, then the verdicts of a day
/// that fails and of a run that cannot audit, rendered into one page.
struct Fixture {
    _tmp: tempfile::TempDir,
    table: PathBuf,
    fail: PathBuf,
    error: PathBuf,
}

fn publish(table: &Path, staged: &Path, date: &str) -> Output {
    let key = format!("sales_date={date}");
    dqgate(
        &repo(),
        &[
            "publish",
            RECIPE_RULES,
            "--staged",
            staged.to_str().unwrap(),
            "--partition",
            &key,
            "--table",
            table.to_str().unwrap(),
            "--format",
            "json",
        ],
    )
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("warehouse/daily_sales");
    let days: [(&str, &str, &[&str]); 4] = [
        ("2025-03-01", "sales_ok", &FILES),
        ("2025-03-02", "sales_small", &FILES),
        ("2025-03-03", "sales_ok", &FILES[..2]),
        ("2025-03-04", "sales_ok", &[FILES[0], FILES[2]]),
    ];
    for (date, fixture, files) in days {
        let staged = stage(fixture, files, &tmp.path().join("staging").join(date));
        let out = publish(&table, &staged, date);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    }
    let staged = stage("sales_bad", &FILES, &tmp.path().join("staging/bad"));
    let out = publish(&table, &staged, "2025-03-05");
    assert_eq!(out.status.code(), Some(1));
    let fail = tmp.path().join("fail.json");
    fs::write(&fail, &out.stdout).unwrap();
    let out = dqgate(
        &repo(),
        &[
            "check",
            RECIPE_RULES,
            "--staged",
            "testdata/data/truncated",
            "--partition",
            "sales_date=2025-03-06",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let error = tmp.path().join("error.json");
    fs::write(&error, &out.stdout).unwrap();
    Fixture {
        _tmp: tmp,
        table,
        fail,
        error,
    }
}

fn report(cwd: &Path, args: &[&str]) -> Output {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    dqgate(cwd, &all)
}

#[test]
fn html_report_shows_verdicts_history_and_charts() {
    let f = fixture();
    let out = report(
        &repo(),
        &[
            f.fail.to_str().unwrap(),
            f.error.to_str().unwrap(),
            "--table",
            f.table.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let html = stdout(&out);
    assert!(html.starts_with("<!DOCTYPE html>"));
    for want in [
        "<span class=\"badge fail\">FAIL</span> daily_sales [sales_date=2025-03-05]",
        "<span class=\"badge error\">ERROR</span> the data could not be audited",
        "is not a valid Parquet file",
        "<span class=\"badge warn\">WARN</span>",
        "<span class=\"badge skip\">skipped</span>",
        "no sudden drop",
        "<td>JPY</td><td class=\"num\">2</td>",
        "<td class=\"value\">5.92 %</td><td>&lt; 2 %</td>",
        "4 published partitions",
        "<td><code>sales_date=2025-03-04</code></td>",
    ] {
        assert!(html.contains(want), "missing {want:?}");
    }
    // The history table lists the four days in run-key order; the failed
    // day was never published, so it is not there.
    let days: Vec<usize> = (1..=5)
        .map(|d| {
            html.find(&format!("<td><code>sales_date=2025-03-0{d}</code>"))
                .unwrap_or(usize::MAX)
        })
        .collect();
    assert!(days[0] < days[1] && days[1] < days[2] && days[2] < days[3]);
    assert_eq!(days[4], usize::MAX);
    // One chart per metric with numbers: every metric of the recipe's rules.
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 6);
    // Each chart has the four published points and this run's point.
    assert_eq!(html.matches("<circle class=\"published\"").count(), 6 * 4);
    assert_eq!(html.matches("<circle class=\"run fail\"").count(), 4);
    assert!(html.contains("<title>2025-03-02: 1100 (published)</title>"));
    // Self-contained and script-free.
    for external in ["<script", "<link", "src=", "url(", "@import"] {
        assert!(!html.contains(external), "{external}");
    }
    // Absolute inputs are shown by their file names only.
    assert!(!html.contains(f.table.parent().unwrap().to_str().unwrap()));
}

#[test]
fn html_report_is_deterministic_and_written_with_o() {
    let f = fixture();
    let dir = f.fail.parent().unwrap();
    let page = dir.join("page.html");
    let args = [
        "fail.json",
        "error.json",
        "--table",
        "warehouse/daily_sales",
    ];
    let first = report(dir, &args);
    assert_eq!(first.status.code(), Some(0));
    let mut with_o = args.to_vec();
    with_o.extend(["-o", "page.html"]);
    let second = report(dir, &with_o);
    assert_eq!(second.status.code(), Some(0));
    assert!(second.stdout.is_empty());
    assert_eq!(fs::read(&page).unwrap(), first.stdout);
}

#[test]
fn html_escapes_what_comes_from_data() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = tmp.path().join("rules.dq");
    fs::write(
        &rules,
        "table daily_sales\npartitioned by sales_date\n\
         check values(currency) in ('<script>alert(1)</script>') as '<img src=x onerror=alert(1)>'\n",
    )
    .unwrap();
    let out = dqgate(
        &repo(),
        &[
            "check",
            rules.to_str().unwrap(),
            "--staged",
            "testdata/data/sales_ok",
            "--partition",
            "sales_date=2025-03-05",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let verdict = tmp.path().join("v.json");
    fs::write(&verdict, &out.stdout).unwrap();
    let html = stdout(&report(&repo(), &[verdict.to_str().unwrap()]));
    assert!(!html.contains("<script") && !html.contains("<img"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn report_refuses_what_is_not_a_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let junk = tmp.path().join("junk.json");
    fs::write(
        &junk,
        "{\"format\": \"something else\", \"verdict\": \"pass\"}",
    )
    .unwrap();
    let out = report(tmp.path(), &["junk.json"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("junk.json") && err.contains("dqgate.verdict/v1"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let out = report(tmp.path(), &["missing.json"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.json"));

    fs::write(tmp.path().join("ok.json"), "").unwrap();
    let out = report(tmp.path(), &["ok.json"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no verdict"));

    let no_table = report(
        &repo(),
        &[
            "testdata/cases/sales_bad_json/stdout",
            "--table",
            tmp.path().join("nope").to_str().unwrap(),
        ],
    );
    assert_eq!(no_table.status.code(), Some(3));
}

/// A publish that fails after a passing verdict prints the verdict and then
/// an error record; the report shows both.
#[test]
fn report_reads_a_verdict_followed_by_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let passed = fs::read_to_string(repo().join("testdata/cases/sales_ok_json/stdout")).unwrap();
    let error = "{\"format\": \"dqgate.verdict/v1\", \"verdict\": \"error\", \"error\": \"publish conflict\"}\n";
    fs::write(tmp.path().join("both.json"), format!("{passed}{error}")).unwrap();
    let out = report(tmp.path(), &["both.json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let html = stdout(&out);
    assert!(html.contains("<span class=\"badge pass\">PASS</span> daily_sales"));
    assert!(html.contains("<pre class=\"message\">publish conflict</pre>"));
}

/// A passed verdict whose publish is refused (the staged copy keeps Spark's
/// `_temporary/` files) is still one JUnit document, with the refusal as an
/// `<error>` testcase, and the exit code of the refusal.
#[test]
fn junit_publish_error_stays_one_document() {
    let tmp = tempfile::tempdir().unwrap();
    let staged = stage("sales_ok", &FILES, &tmp.path().join("staged"));
    stage("sales_ok", &["_temporary/0/part-00003.parquet"], &staged);
    let table = tmp.path().join("table");
    let out = dqgate(
        &repo(),
        &[
            "publish",
            "rules/daily_sales.dq",
            "--staged",
            staged.to_str().unwrap(),
            "--partition",
            "sales_date=2025-03-05",
            "--table",
            table.to_str().unwrap(),
            "--format",
            "junit",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let doc = stdout(&out);
    assert_eq!(doc.matches("<?xml").count(), 1);
    assert_eq!(attr_count(&doc, "testsuite", "tests"), 12);
    assert_eq!(attr_count(&doc, "testsuite", "errors"), 1);
    assert!(doc.contains("name=\"publish\" time=\"0\">\n      <error type=\"error\""));
    assert!(!table.join("sales_date=2025-03-05").exists());
}

fn gate(staged: &Path, date: &str, table: &Path, reports: &Path) -> Output {
    Command::new("bash")
        .arg(repo().join("docs/recipes/gate.sh"))
        .args([RECIPE_RULES, staged.to_str().unwrap(), date])
        .args([table, reports])
        .env("DQGATE", env!("CARGO_BIN_EXE_dqgate"))
        .current_dir(repo())
        .output()
        .expect("run gate.sh")
}

/// Every file under `dir` with its bytes: the table's whole state.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn shell_recipe_publishes_on_pass_and_leaves_the_table_alone_on_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("warehouse/daily_sales");
    let reports = tmp.path().join("reports");

    let good = stage("sales_ok", &FILES, &tmp.path().join("staging/good"));
    let out = gate(&good, "2025-03-05", &table, &reports);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("published sales_date=2025-03-05"));
    assert!(table
        .join("sales_date=2025-03-05/_dqgate_audit.json")
        .is_file());
    assert!(reports.join("report-2025-03-05.html").is_file());
    let verified = dqgate(
        &repo(),
        &[
            "verify",
            table.to_str().unwrap(),
            "--partition",
            "sales_date=2025-03-05",
        ],
    );
    assert_eq!(verified.status.code(), Some(0));

    let before = snapshot(&table);
    let bad = stage("sales_bad", &FILES, &tmp.path().join("staging/bad"));
    let out = gate(&bad, "2025-03-05", &table, &reports);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("gate failed"));
    assert_eq!(snapshot(&table), before, "a failed gate changed the table");
    assert!(
        bad.join("part-00000.parquet").is_file(),
        "staged files moved"
    );
    let verdict = fs::read_to_string(reports.join("verdict-2025-03-05.json")).unwrap();
    assert!(verdict.contains("\"verdict\": \"fail\""));
    let page = fs::read_to_string(reports.join("report-2025-03-05.html")).unwrap();
    assert!(page.contains("<span class=\"badge fail\">FAIL</span>"));

    let out = gate(&tmp.path().join("nothing"), "2025-03-06", &table, &reports);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(snapshot(&table), before);
}

/// A table whose history cannot be read names the file (or the table) as
/// the command named it, relative paths staying relative.
#[test]
fn report_names_the_unreadable_part_of_a_table() {
    let f = fixture();
    let dir = f.fail.parent().unwrap();
    let err = |args: &[&str]| {
        let out = report(dir, args);
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(out.stdout.is_empty());
        String::from_utf8_lossy(&out.stderr).trim_end().to_string()
    };
    assert_eq!(
        err(&["fail.json", "--table", "warehouse/nope"]),
        "dqgate: error: cannot read the table warehouse/nope: No such file or directory (os error 2)"
    );
    assert_eq!(
        err(&["fail.json", "--table", "fail.json"]),
        "dqgate: error: cannot read the table fail.json: is not a directory"
    );
    let trail = f.table.join("_dqgate/trail/sales_date=2025-03-02.jsonl");
    let mut lines = fs::read_to_string(&trail).unwrap();
    lines.push_str("not json\n");
    fs::write(&trail, lines).unwrap();
    assert_eq!(
        err(&["fail.json", "--table", "warehouse/daily_sales"]),
        "dqgate: error: cannot read warehouse/daily_sales/_dqgate/trail/sales_date=2025-03-02.jsonl: \
         bad trail line: expected ident at line 1 column 2"
    );
    // A record is read (and refused) before its partition's trail.
    fs::write(
        f.table.join("sales_date=2025-03-02/_dqgate_audit.json"),
        "{broken",
    )
    .unwrap();
    assert_eq!(
        err(&["fail.json", "--table", "warehouse/daily_sales"]),
        "dqgate: error: cannot read warehouse/daily_sales/sales_date=2025-03-02/_dqgate_audit.json: \
         key must be a string at line 1 column 2"
    );
}
