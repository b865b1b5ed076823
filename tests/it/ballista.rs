//! `--engine ballista://HOST:PORT` against a real Ballista cluster: a
//! `dqgate ballista scheduler` and two `dqgate ballista executor` processes on
//! loopback, sharing this file system. Every golden `check`/`publish` case
//! must give the local engine's verdict byte for byte, both as it stands and
//! with `--scan-only` (so the metrics the footers would answer run on the
//! executors too, `exact_sum` included).

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::golden::{diff, run_setup};
use crate::support::{dqgate, repo};

/// A scheduler and its executors, stopped on drop.
struct Cluster {
    processes: Vec<Child>,
    scheduler: String,
    _work: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in &mut self.processes {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dqgate ballista")
}

/// Keeps reading a child's stderr so it never blocks on a full pipe.
fn drain(mut from: impl Read + Send + 'static) {
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = from.read_to_end(&mut sink);
    });
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn wait_for_port(addr: &str, child: &mut Child) {
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the process for {addr} exited early: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nothing listens on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Cluster {
    fn start(executors: usize) -> Cluster {
        let work = tempfile::tempdir().unwrap();
        let mut cluster = Cluster {
            processes: Vec::new(),
            scheduler: String::new(),
            _work: work,
        };
        let mut scheduler = spawn(&["ballista", "scheduler", "--bind", "127.0.0.1:0"]);
        let mut lines = BufReader::new(scheduler.stderr.take().unwrap());
        let mut first = String::new();
        lines.read_line(&mut first).unwrap();
        cluster.scheduler = first
            .trim()
            .strip_prefix("dqgate ballista scheduler: listening on ")
            .unwrap_or_else(|| panic!("scheduler said: {first:?}"))
            .to_string();
        drain(lines);
        cluster.processes.push(scheduler);
        for i in 0..executors {
            let (flight, grpc) = (free_port(), free_port());
            let bind = format!("127.0.0.1:{flight}");
            let dir = cluster._work.path().join(format!("executor{i}"));
            fs::create_dir_all(&dir).unwrap();
            let mut executor = spawn(&[
                "ballista",
                "executor",
                "--scheduler",
                &cluster.scheduler,
                "--bind",
                &bind,
                "--grpc-port",
                &grpc.to_string(),
                "--concurrent-tasks",
                "2",
                "--work-dir",
                dir.to_str().unwrap(),
            ]);
            drain(executor.stderr.take().unwrap());
            wait_for_port(&bind, &mut executor);
            cluster.processes.push(executor);
        }
        cluster
    }

    fn engine(&self) -> String {
        format!("ballista://{}", self.scheduler)
    }
}

/// The arguments of a golden case's `cmd`, `$TMP` replaced.
fn case_args(dir: &Path, tmp: &str) -> Vec<String> {
    fs::read_to_string(dir.join("cmd"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.replace("$TMP", tmp))
        .collect()
}

/// Runs golden case `dir` with `extra` arguments after a fresh setup.
fn run_case(dir: &Path, extra: &[&str]) -> std::process::Output {
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().to_string_lossy().to_string();
    if let Ok(setup) = fs::read_to_string(dir.join("setup")) {
        run_setup(dir, &setup, &tmp_path).unwrap();
    }
    let mut args = case_args(dir, &tmp_path);
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    dqgate(dir, &args)
}

#[test]
fn golden_cases_give_the_local_verdicts_on_ballista() {
    let cluster = Cluster::start(2);
    let engine = cluster.engine();
    let mut dirs: Vec<_> = fs::read_dir(repo().join("testdata/cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("cmd").is_file())
        .collect();
    dirs.sort();
    let (mut ran, mut failures) = (0, Vec::new());
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let first = case_args(dir, "")[0].clone();
        if first != "check" && first != "publish" {
            eprintln!("skipped {name}: `{first}` runs no plan, so no engine");
            continue;
        }
        // As blessed (the local engine's verdict), then with `--scan-only`
        // against the local engine's `--scan-only` run.
        // A case refused before planning (exit 2 or 3) has no scan to vary.
        let verdict = matches!(
            fs::read_to_string(dir.join("code")).unwrap().trim(),
            "0" | "1"
        );
        for scan_only in [false, true] {
            if scan_only && !verdict {
                continue;
            }
            let mode: &[&str] = if scan_only { &["--scan-only"] } else { &[] };
            let run = |extra: &[&str]| run_case(dir, &[mode, extra].concat());
            let (want_code, want_stdout, want_stderr) = if scan_only {
                let out = run(&[]);
                (
                    format!("{}\n", out.status.code().unwrap_or(-1)),
                    String::from_utf8_lossy(&out.stdout).to_string(),
                    None,
                )
            } else {
                let expect = |f: &str| fs::read_to_string(dir.join(f)).ok();
                (
                    expect("code").unwrap(),
                    expect("stdout").unwrap(),
                    expect("stderr"),
                )
            };
            let out = run(&["--engine", &engine]);
            ran += 1;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let code = format!("{}\n", out.status.code().unwrap_or(-1));
            let mut problems = Vec::new();
            if code != want_code {
                problems.push(format!("exit {} != {}", code.trim(), want_code.trim()));
            }
            if stdout != want_stdout {
                problems.push(diff("stdout", &want_stdout, &stdout));
            }
            if want_stderr.as_ref().is_some_and(|w| *w != stderr) {
                problems.push(diff("stderr", want_stderr.as_deref().unwrap(), &stderr));
            }
            if !problems.is_empty() {
                failures.push(format!(
                    "case {name} (scan_only {scan_only}):\n{}\n(stderr was:\n{stderr})",
                    problems.join("\n")
                ));
            }
        }
    }
    // A `file://` URL goes through the object-store path: the executors
    // build the store themselves.
    let url = format!(
        "file://{}",
        repo().join("testdata/data/sales_bad").display()
    );
    let local = daily_sales(&url, &["--scan-only", "--format", "json"]);
    let remote = daily_sales(
        &url,
        &["--scan-only", "--format", "json", "--engine", &engine],
    );
    assert_eq!(local.status.code(), Some(1));
    assert_eq!(remote.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&remote.stdout),
        String::from_utf8_lossy(&local.stdout)
    );
    assert!(ran >= 90, "only {ran} runs");
    assert!(
        failures.is_empty(),
        "{} run(s) differ from the local engine:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// `check rules/daily_sales.dq` of `staged`, from the repository root.
fn daily_sales(staged: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "check",
        "rules/daily_sales.dq",
        "--staged",
        staged,
        "--partition",
        "sales_date=2025-03-05",
    ];
    args.extend(extra);
    dqgate(&repo(), &args)
}

fn sales_ok(extra: &[&str]) -> std::process::Output {
    daily_sales("testdata/data/sales_ok", extra)
}

#[test]
fn an_unreachable_scheduler_is_exit_3_naming_it() {
    let port = free_port();
    let engine = format!("ballista://127.0.0.1:{port}");
    let out = sales_ok(&["--engine", &engine, "--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot reach the Ballista scheduler at 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"verdict\": \"error\""), "{stdout}");
}

#[test]
fn engine_misuse_is_exit_2() {
    for engine in ["spark://127.0.0.1:7077", "ballista://", "ballista://h:1/x"] {
        let out = sales_ok(&["--engine", engine]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine}: {stderr}");
        assert!(stderr.contains(engine), "{engine}: {stderr}");
    }
    // The memory bound is each executor's; refused before any connection.
    let out = sales_ok(&[
        "--engine",
        "ballista://127.0.0.1:1",
        "--memory-limit",
        "1GiB",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--memory-pool-size"), "{stderr}");
    // A rule-file error is found before the scheduler is contacted.
    let out = dqgate(
        &repo(),
        &[
            "check",
            "testdata/cases/lint_syntax/rules.dq",
            "--staged",
            "testdata/data/sales_ok",
            "--engine",
            "ballista://127.0.0.1:1",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let out = sales_ok(&["--engine", "local"]);
    assert_eq!(out.status.code(), Some(0));
}
