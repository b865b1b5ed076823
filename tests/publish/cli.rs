//! The real `dqgate publish` binary under SIGKILL and in races, with readers
//! of both kinds reading the partition all along.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

const RULES: &str =
    "table t\npartitioned by d\ncheck row_count > 0\ncheck distinct_count(version) = 1\n";

struct Bench {
    env: Env,
    rules: PathBuf,
}

impl Bench {
    fn new() -> Bench {
        let env = Env::new();
        let rules = env.tmp.path().join("t.dq");
        fs::write(&rules, RULES).unwrap();
        Bench { env, rules }
    }

    fn command(&self, staged: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
        cmd.arg("publish")
            .arg(&self.rules)
            .arg("--staged")
            .arg(staged)
            .args(["--partition", "d=1", "--keep", "1000", "--table"])
            .arg(self.env.root())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// Stages version `v` (fresh directory each call).
    fn stage(&self, v: i64, tag: &str) -> PathBuf {
        let dir = self
            .env
            .tmp
            .path()
            .join("staging")
            .join(format!("{v}-{tag}"));
        fs::remove_dir_all(&dir).ok();
        stage_into(&dir, v, 3);
        dir
    }
}

/// xorshift: a reproducible pseudo-random stream without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[test]
fn sigkill_at_random_instants_of_the_real_binary() {
    let iters: u64 = std::env::var("DQGATE_CRASH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let b = Bench::new();
    let root = b.env.root().to_path_buf();
    let part = root.join("d=1");
    let phases = b.env.tmp.path().join("phases.log");
    // How long an uninterrupted publish takes: the kill delays span it.
    let first = b.stage(0, "a");
    let t = Instant::now();
    assert_eq!(b.command(&first).status().unwrap().code(), Some(0));
    let span = (t.elapsed().as_micros() as u64 * 3 / 2).max(1000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ span);
    let mut kills: BTreeMap<String, usize> = BTreeMap::new();
    let readers = with_readers(&root, || {
        for i in 1..=iters as i64 {
            fs::write(&phases, "").unwrap();
            let staged = b.stage(i, "a");
            let mut child = b
                .command(&staged)
                .env("DQGATE_TEST_PHASE_LOG", &phases)
                .spawn()
                .unwrap();
            thread::sleep(Duration::from_micros(rng.below(span)));
            let outcome = match child.try_wait().unwrap() {
                Some(status) => {
                    assert_eq!(status.code(), Some(0), "iteration {i}");
                    "finished before the kill".to_string()
                }
                None => {
                    child.kill().unwrap();
                    child.wait().unwrap();
                    let log = fs::read_to_string(&phases).unwrap();
                    format!("killed in {}", log.lines().last().unwrap_or("audit"))
                }
            };
            *kills.entry(outcome).or_default() += 1;
            // Old or new, complete; nothing else globbable.
            let seen = read_partition(&part);
            assert!(
                seen == [i - 1].into() || seen == [i].into(),
                "iteration {i}: {seen:?}"
            );
            assert_only_published(&root);
            // Re-running the pipeline converges (a fresh staging dir when
            // the swap took the first one).
            let again = if staged.join("part-00000.parquet").exists() {
                staged
            } else {
                b.stage(i, "b")
            };
            let code = b.command(&again).status().unwrap().code();
            assert_eq!(code, Some(0), "iteration {i}: re-run");
            assert_eq!(read_partition(&part), [i].into(), "iteration {i}");
            assert_only_published(&root);
        }
    });
    assert!(b
        .env
        .table
        .verify(&key(&[("d", "1")]))
        .unwrap()
        .differences
        .is_empty());
    println!("crash test: {iters} iterations; outcomes by phase: {kills:?}");
    println!(
        "crash test readers: {} resolve-once reads, {} listing reads, {} listing reads hit a swapped-out file (retryable)",
        readers.0, readers.1, readers.2
    );
}

#[test]
fn racing_publishers_of_the_real_binary() {
    let b = Bench::new();
    let root = b.env.root().to_path_buf();
    let mut codes: BTreeMap<i32, usize> = BTreeMap::new();
    for round in 0..20i64 {
        let (x, y) = (b.stage(2 * round, "r"), b.stage(2 * round + 1, "r"));
        let mut a = b.command(&x).spawn().unwrap();
        let mut c = b.command(&y).spawn().unwrap();
        let got = [a.wait().unwrap().code(), c.wait().unwrap().code()];
        for code in got {
            let code = code.expect("exited normally");
            assert!(code == 0 || code == 4, "round {round}: exit {code}");
            *codes.entry(code).or_default() += 1;
        }
        assert!(got.contains(&Some(0)), "round {round}: nobody won");
        let seen = read_partition(&root.join("d=1"));
        assert!(
            seen == [2 * round].into() || seen == [2 * round + 1].into(),
            "{seen:?}"
        );
        assert_only_published(&root);
    }
    println!("race test: exit codes {codes:?}");
}
