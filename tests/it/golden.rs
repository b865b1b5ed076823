//! Golden cases: every directory under `testdata/cases/` holds a `cmd` (the
//! arguments, one per line, relative to the case directory) and the expected
//! `stdout` and exit `code`, and optionally the expected `stderr`.
//!
//! `DQGATE_BLESS=1 cargo test golden` rewrites the expected files from the
//! actual output; review the diff before committing it.
//!
//! A case that needs a published table has a `setup` file: one step per
//! line, run in order in the case directory before `cmd`:
//! `copy SRC DST` copies a directory without its `_` and `.` entries (a
//! staged partition is consumed by publishing, which refuses leftovers), `dqgate ARGS...` runs the real binary and must exit 0,
//! `dqgate! ARGS...` must exit non-zero (a failed publish). `$TMP` in
//! `setup` and `cmd` is a fresh temporary directory of the case.

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
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().to_string_lossy().to_string();
    if let Ok(setup) = fs::read_to_string(dir.join("setup")) {
        run_setup(dir, &setup, &tmp_path).map_err(|e| format!("case {name}: setup: {e}"))?;
    }
    let cmd = fs::read_to_string(dir.join("cmd")).unwrap();
    let args: Vec<String> = cmd
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.replace("$TMP", &tmp_path))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
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

/// Runs the steps of a `setup` file (see the module docs).
pub(crate) fn run_setup(dir: &Path, setup: &str, tmp: &str) -> Result<(), String> {
    for line in setup.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.replace("$TMP", tmp);
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["copy", src, dst] => {
                copy_dir(&dir.join(src), &dir.join(dst)).map_err(|e| format!("{line}: {e}"))?
            }
            [run @ ("dqgate" | "dqgate!"), args @ ..] => {
                let out = dqgate(dir, args);
                if out.status.success() != (*run == "dqgate") {
                    return Err(format!(
                        "{line}: exit {:?}\n{}",
                        out.status.code(),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
            _ => return Err(format!("unknown setup step `{line}`")),
        }
    }
    Ok(())
}

/// Copies a directory without its `_` and `.` entries.
pub(crate) fn copy_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(['_', '.']) {
            continue;
        }
        let to = dst.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else {
            fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}

/// The first differing line, with context.
pub(crate) fn diff(what: &str, want: &str, got: &str) -> String {
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
