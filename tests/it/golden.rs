//! Golden cases: every directory under `testdata/cases/` holds a `cmd` (the
//! arguments, one per line, relative to the case directory) and the expected
//! `stdout` and exit `code`, and optionally the expected `stderr`.
//!
//! `DQGATE_BLESS=1 cargo test golden` rewrites the expected files from the
//! actual output; review the diff before committing it.

use std::fs;
use std::path::Path;

use crate::support::{dqgate, repo};

#[test]
fn golden_cases() {
    let root = repo().join("testdata/cases");
    let bless = std::env::var_os("DQGATE_BLESS").is_some();
    let mut dirs: Vec<_> = fs::read_dir(&root)
        .expect("testdata/cases")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("cmd").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 10, "golden cases missing");
    let mut failures = Vec::new();
    for dir in &dirs {
        if let Err(msg) = run_case(dir, bless) {
            failures.push(msg);
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

fn run_case(dir: &Path, bless: bool) -> Result<(), String> {
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let cmd = fs::read_to_string(dir.join("cmd")).unwrap();
    let args: Vec<&str> = cmd
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let out = dqgate(dir, &args);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let code = format!("{}\n", out.status.code().unwrap_or(-1));
    if bless {
        fs::write(dir.join("stdout"), &stdout).unwrap();
        fs::write(dir.join("code"), &code).unwrap();
        if dir.join("stderr").exists() {
            fs::write(dir.join("stderr"), &stderr).unwrap();
        }
        return Ok(());
    }
    let mut problems = Vec::new();
    let expect = |file: &str| fs::read_to_string(dir.join(file)).unwrap_or_default();
    if expect("code") != code {
        problems.push(format!(
            "exit code {} != expected {}",
            code.trim(),
            expect("code").trim()
        ));
    }
    if expect("stdout") != stdout {
        problems.push(diff("stdout", &expect("stdout"), &stdout));
    }
    if dir.join("stderr").exists() && expect("stderr") != stderr {
        problems.push(diff("stderr", &expect("stderr"), &stderr));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "case {name}:\n{}\n(stderr was:\n{stderr})",
            problems.join("\n")
        ))
    }
}

/// The first differing line, with context.
fn diff(what: &str, want: &str, got: &str) -> String {
    let (w, g): (Vec<_>, Vec<_>) = (want.lines().collect(), got.lines().collect());
    let i = w
        .iter()
        .zip(&g)
        .position(|(a, b)| a != b)
        .unwrap_or(w.len().min(g.len()));
    format!(
        "{what} differs at line {}:\n  expected: {:?}\n  actual:   {:?}",
        i + 1,
        w.get(i).unwrap_or(&"<end>"),
        g.get(i).unwrap_or(&"<end>")
    )
}
