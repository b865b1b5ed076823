//! Shared helpers: paths and running the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn data(name: &str) -> PathBuf {
    repo().join("testdata/data").join(name)
}

/// Runs `dqgate` with `args` in `cwd`.
pub fn dqgate(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args(args)
        .current_dir(cwd)
        .env("TZ", "Pacific/Chatham")
        .env("LC_ALL", "de_DE.UTF-8")
        .output()
        .expect("run dqgate")
}

/// `dqgate publish RULES --staged STAGED --partition PARTITION --table
/// table` in `cwd`, which must pass.
pub fn publish_into(cwd: &Path, rules: &str, staged: &Path, partition: &str) {
    let out = dqgate(
        cwd,
        &[
            "publish",
            rules,
            "--staged",
            staged.to_str().unwrap(),
            "--partition",
            partition,
            "--table",
            "table",
        ],
    );
    assert!(
        out.status.success(),
        "publish {partition}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `check rules.dq --format json -v` in `cwd` of `staged` as `day=DAY`
/// against `table` (2 threads), with the key strategy forced or not; it
/// must give a verdict (exit 0 or 1). Returns stdout and stderr.
pub fn check_across(
    cwd: &Path,
    staged: &Path,
    day: &str,
    strategy: Option<&str>,
) -> (String, String) {
    let env: Vec<(&str, &str)> = strategy
        .map(|s| ("DQGATE_TEST_KEY_STRATEGY", s))
        .into_iter()
        .collect();
    check_across_with(cwd, staged, day, &env, &[])
}

/// [`check_across`] with the test hooks `env` set and the `extra`
/// arguments.
pub fn check_across_with(
    cwd: &Path,
    staged: &Path,
    day: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
    cmd.current_dir(cwd).args([
        "check",
        "rules.dq",
        "--staged",
        staged.to_str().unwrap(),
        "--partition",
        &format!("day={day}"),
        "--table",
        "table",
        "--format",
        "json",
        "--threads",
        "2",
        "-v",
    ]);
    cmd.args(extra).envs(env.iter().copied());
    verdict_and_log(&mut cmd)
}

/// Runs `cmd`, a `check` that must give a verdict (exit 0 or 1): its
/// stdout and stderr.
pub fn verdict_and_log(cmd: &mut Command) -> (String, String) {
    let out = cmd.output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Audits `dir` with the rule file `rules` in process (no published side).
pub fn audit_in_process(
    rt: &tokio::runtime::Runtime,
    rules: &Path,
    dir: &Path,
    engine: &dqgate::engine::EngineOptions,
) -> dqgate::verdict::Verdict {
    use dqgate::audit::{prepare, Published, RuleSource};
    let prepared = rt
        .block_on(prepare(
            RuleSource::read(rules).unwrap(),
            dir,
            &[],
            false,
            engine,
        ))
        .unwrap();
    rt.block_on(prepared.run(&Published::NotGiven)).unwrap()
}

/// Copies a staged directory without hidden names (publish moves it, and
/// refuses Spark's `_temporary/` leftovers).
/// The files of `dir` (not its subdirectories), by name, with their bytes.
pub fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

pub fn stage(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with('_') || name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            stage(&p, &to.join(&name));
        } else {
            std::fs::copy(&p, to.join(&name)).unwrap();
        }
    }
}
