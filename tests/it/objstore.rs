//! Staged files read through the object-store code path: `file://` URLs go
//! through `object_store`'s local file system exactly as `s3://` goes through
//! its S3 client (listing, ranged footer reads, the store registered with
//! DataFusion), so these tests exercise that path with only the toolchain.
//! The real S3 server test is `tests/objstore/s3.py`, run by `.ci/run`.

use std::fs;
use std::path::Path;
use std::process::Output;

use crate::support::{data, dqgate, repo};

/// `dir` as a `file://` URL of a prefix.
fn file_url(dir: &Path) -> String {
    format!("file://{}/", fs::canonicalize(dir).unwrap().display())
}

/// The golden case's arguments as written, the same with `--staged DIR`
/// replaced by its URL, and where that argument is.
fn case_args(case: &Path) -> Option<(Vec<String>, Vec<String>, usize)> {
    let cmd = fs::read_to_string(case.join("cmd")).unwrap();
    let mut args: Vec<String> = cmd
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    // Cases with a setup (a published table under `$TMP`) test the local
    // table side; the staged side of their runs is covered by the others.
    if args[0] != "check" || cmd.contains("$TMP") || case.join("setup").exists() {
        return None;
    }
    let at = args.iter().position(|a| a == "--staged")? + 1;
    let dir = case.join(&args[at]);
    if !dir.is_dir() {
        return None; // missing_staged: tested below with a URL of its own
    }
    let original = args.clone();
    args[at] = file_url(&dir);
    Some((original, args, at))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every golden `check` case gives the same bytes on stdout and the same exit
/// code when its staged directory is given as a `file://` URL: same files
/// (hidden ones skipped), same fingerprint, same verdict.
#[test]
fn golden_cases_give_the_same_verdict_through_the_object_store() {
    let root = repo().join("testdata/cases");
    let mut cases: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    let mut compared = 0;
    let mut verdicts = 0;
    for case in &cases {
        let Some((original, args, staged_at)) = case_args(case) else {
            continue;
        };
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = dqgate(case, &argv);
        let name = case.file_name().unwrap().to_string_lossy();
        let code = out.status.code().unwrap();
        let expected_code: i32 = fs::read_to_string(case.join("code"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(code, expected_code, "{name}: {}", stderr(&out));
        let stdout = String::from_utf8(out.stdout.clone()).unwrap();
        let expected = fs::read_to_string(case.join("stdout")).unwrap();
        if code == 3 && stdout != expected {
            // The error names the file by its URL instead of its path:
            // otherwise the bytes are the same.
            let (url, given) = (&args[staged_at], &original[staged_at]);
            let as_local =
                stdout.replace(url.as_str(), &format!("{}/", given.trim_end_matches('/')));
            assert_eq!(as_local, expected, "{name}: error output differs");
            assert!(
                stderr(&out).contains(url.as_str()),
                "{name}: {}",
                stderr(&out)
            );
        } else {
            assert_eq!(stdout, expected, "{name}: stdout differs");
            if code <= 1 {
                assert!(
                    stderr(&out).contains(" GET/HEAD request(s), "),
                    "{name}: {}",
                    stderr(&out)
                );
                verdicts += 1;
            }
        }
        compared += 1;
    }
    assert!(
        compared >= 10 && verdicts >= 7,
        "{compared} cases, {verdicts} verdicts"
    );
}

/// The number of GET requests the summary line reports.
fn gets(out: &Output) -> u64 {
    let err = stderr(out);
    let before = err
        .split(" GET/HEAD request(s)")
        .next()
        .unwrap_or_else(|| panic!("no request count in: {err}"));
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// A rule file the footers answer reads nothing but the footers; with
/// `--scan-only` the scan reads pages on top.
#[test]
fn footer_fast_path_reads_only_footers() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("footers.dq");
    fs::write(
        &rules,
        "table types\n\
         check row_count between 1 and 10\n\
         check min(i8) = -3\n\
         check max(d) = date '2025-03-05'\n\
         check null_rate(all_null) = 100%\n",
    )
    .unwrap();
    let staged = file_url(&data("types"));
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "check".to_string(),
            rules.display().to_string(),
            "--staged".into(),
            staged.clone(),
            "--format".into(),
            "json".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        dqgate(&repo(), &a)
    };
    let fast = run(args(&[]));
    assert_eq!(fast.status.code(), Some(0), "{}", stderr(&fast));
    let text = String::from_utf8(fast.stdout.clone()).unwrap();
    assert_eq!(
        text.matches("\"source\": \"metadata\"").count(),
        4,
        "{text}"
    );
    assert!(!text.contains("\"source\": \"scan\""), "{text}");
    // One file: its first and last bytes (one request, they are close in a
    // small file), then its footer; not one page.
    assert_eq!(gets(&fast), 2, "{}", stderr(&fast));

    let slow = run(args(&["--scan-only"]));
    assert_eq!(slow.status.code(), Some(0), "{}", stderr(&slow));
    assert!(gets(&slow) > 2, "{}", stderr(&slow));
}

/// The fingerprint does not depend on where the files are.
#[test]
fn same_fingerprint_local_and_through_the_store() {
    let fingerprint = |staged: &str| {
        let out = dqgate(
            &repo(),
            &[
                "check",
                "rules/daily_sales.dq",
                "--staged",
                staged,
                "--partition",
                "sales_date=2025-03-05",
                "--format",
                "json",
            ],
        );
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .find(|l| l.contains("\"fingerprint\""))
            .unwrap_or_else(|| panic!("no fingerprint in {text}"))
            .to_string()
    };
    let local = fingerprint("testdata/data/sales_bad");
    assert_eq!(local, fingerprint(&file_url(&data("sales_bad"))));
}

fn assert_usage_error(out: &Output, needles: &[&str]) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    for n in needles {
        assert!(stderr(out).contains(n), "`{n}` not in: {}", stderr(out));
    }
}

/// Publishing from or to an object store is refused before anything is
/// read or written: a plain directory there cannot be swapped atomically.
#[test]
fn hive_publish_refuses_object_stores() {
    let tables = tempfile::tempdir().unwrap();
    let table = tables.path().display().to_string();
    let staged = file_url(&data("types"));
    let base = [
        "publish",
        "rules/daily_sales.dq",
        "--partition",
        "sales_date=2025-03-05",
        "--format",
        "json",
    ];
    let mut from_store = base.to_vec();
    from_store.extend(["--staged", &staged, "--table", &table]);
    let out = dqgate(&repo(), &from_store);
    assert_usage_error(&out, &["cannot be swapped atomically", "--target delta"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"verdict\": \"error\""));

    let mut to_store = base.to_vec();
    to_store.extend([
        "--staged",
        "testdata/data/sales_ok",
        "--table",
        "s3://bucket/tables/sales/",
        "--target",
        "hive",
    ]);
    let out = dqgate(&repo(), &to_store);
    assert_usage_error(
        &out,
        &[
            "s3://bucket/tables/sales/",
            "never degrades to copy-and-delete",
        ],
    );
    assert_eq!(
        fs::read_dir(tables.path()).unwrap().count(),
        0,
        "something was written"
    );
}

#[test]
fn bad_locations_and_options_are_usage_errors() {
    let check = |extra: &[&str]| {
        let mut a = vec![
            "check",
            "rules/daily_sales.dq",
            "--partition",
            "sales_date=2025-03-05",
        ];
        a.extend(extra);
        dqgate(&repo(), &a)
    };
    assert_usage_error(
        &check(&["--staged", "ftp://host/x/"]),
        &["unsupported scheme"],
    );
    assert_usage_error(
        &check(&["--staged", "s3://user:secret@bucket/x/"]),
        &["credentials"],
    );
    assert_usage_error(
        &check(&[
            "--staged",
            "testdata/data/sales_ok",
            "--storage-option",
            "aws_region=x",
        ]),
        &["not to a local directory"],
    );
    assert_usage_error(
        &check(&[
            "--staged",
            "s3://bucket/x/",
            "--storage-option",
            "colour=blue",
        ]),
        &["`colour` is not an option of Amazon S3"],
    );
}

/// A prefix without data files, and an endpoint nobody listens on: exit 3,
/// the URL named, an error verdict in JSON; never a pass.
#[test]
fn unreadable_locations_exit_3_naming_the_url() {
    let empty = tempfile::tempdir().unwrap();
    let url = file_url(empty.path());
    let out = dqgate(
        &repo(),
        &[
            "check",
            "rules/daily_sales.dq",
            "--staged",
            &url,
            "--partition",
            "sales_date=2025-03-05",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("no Parquet files under `{url}`")),
        "{}",
        stderr(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"verdict\": \"error\""));

    // A store that cannot be configured: Azure without an account name.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args([
            "check",
            "rules/daily_sales.dq",
            "--staged",
            "az://container/sales/",
        ])
        .current_dir(repo())
        .env_remove("AZURE_STORAGE_ACCOUNT_NAME")
        .env_remove("AZURE_STORAGE_ACCOUNT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot configure the store for `az://container/sales/`"),
        "{}",
        stderr(&out)
    );

    // Port 9 (discard) on loopback: nothing listens, the connection is refused.
    let out = against_nobody(&["--staged", "s3://audits/sales/", "--format", "json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot read `s3://audits/sales/`"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"verdict\": \"error\""));

    // The same endpoint as a Delta `--table` beside local staged files: the
    // options go to the table, and the table cannot be read.
    let out = against_nobody(&[
        "--staged",
        "testdata/data/sales_ok",
        "--table",
        "s3://lake/sales/",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Delta table `s3://lake/sales/_delta_log`"),
        "{}",
        stderr(&out)
    );
}

/// `check rules/daily_sales.dq` with `extra` arguments against an S3
/// endpoint nobody listens on (port 9, discard, on loopback), without retries.
fn against_nobody(extra: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args([
            "check",
            "rules/daily_sales.dq",
            "--partition",
            "sales_date=2025-03-05",
            "--storage-option",
            "max_retries=0",
        ])
        .args(extra)
        .current_dir(repo())
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "dqgate-test")
        .env("AWS_SECRET_ACCESS_KEY", "dqgate-test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap()
}
