//! crashfs: a crash-simulating FUSE file system for dqgate's durability
//! tests (issue 23; the driver is `tests/crash/crash.py`).
//!
//! ```text
//! crashfs mount DIR --trace FILE [--fault CLASS:N:ERRNO] [--fault-log FILE]
//!     Takes DIR's content as the durable seed, mounts over DIR and serves
//!     it from memory, recording every mutating operation; on unmount
//!     (`fusermount3 -u DIR`) writes the trace to FILE. With --fault, the
//!     N-th operation of CLASS (create link unlink rename write truncate
//!     sync) fails with ERRNO (ENOSPC or EIO) and is not applied; it is
//!     logged to --fault-log as `CLASS<TAB>ERRNO<TAB>PATH`.
//! crashfs info TRACE
//!     One JSON line: the number of operations, the indices of the syncs,
//!     and the number of operations of each class.
//! crashfs ops TRACE
//!     The operations, one a line (for reading a failure).
//! crashfs materialize TRACE --after K [--random SEED | --full] OUT
//!     Writes into the directory OUT what a power cut after the first K
//!     operations leaves (strict model unless --random), and prints the
//!     state's digest.
//! ```

mod crash;
mod fs;
mod names;
mod trace;
mod tree;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use crash::Model;
use trace::Trace;
use tree::{Op, CLASSES};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crashfs: {e}");
            ExitCode::from(2)
        }
    }
}

type Result<T> = std::result::Result<T, String>;

/// The value of `--name`, if given.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The arguments that are not flags or flag values.
fn positional(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--full" {
            i += 1;
        } else if args[i].starts_with("--") {
            i += 2;
        } else {
            out.push(args[i].as_str());
            i += 1;
        }
    }
    out
}

fn run(args: &[String]) -> Result<()> {
    let (cmd, rest) = args
        .split_first()
        .ok_or("usage: crashfs mount|info|ops|materialize ...")?;
    let pos = positional(rest);
    let load = |p: &str| Trace::load(Path::new(p)).map_err(|e| format!("{p}: {e}"));
    match (cmd.as_str(), pos.as_slice()) {
        ("mount", [dir]) => mount(Path::new(dir), rest),
        ("info", [t]) => {
            println!("{}", info(&load(t)?));
            Ok(())
        }
        ("ops", [t]) => {
            print_ops(&load(t)?);
            Ok(())
        }
        ("materialize", [t, out]) => {
            let trace = load(t)?;
            let k = match flag(rest, "--after") {
                Some(k) => k.parse().map_err(|_| format!("bad --after {k}"))?,
                None => trace.ops.len(),
            };
            let model = if rest.iter().any(|a| a == "--full") {
                Model::Full
            } else if let Some(s) = flag(rest, "--random") {
                Model::Random(s.parse().map_err(|_| format!("bad --random {s}"))?)
            } else {
                Model::Strict
            };
            let tree = crash::state_after(&trace, k, model);
            let digest =
                crash::materialize(&tree, Path::new(out)).map_err(|e| format!("{out}: {e}"))?;
            println!("{digest:016x}");
            Ok(())
        }
        _ => Err(format!("unknown command or arguments: {}", args.join(" "))),
    }
}

fn parse_fault(spec: &str) -> Result<fs::Fault> {
    let bad = || format!("bad --fault {spec} (CLASS:N:ENOSPC|EIO)");
    let mut parts = spec.split(':');
    let (Some(class), Some(n), Some(errno)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let class = CLASSES.iter().position(|c| *c == class).ok_or_else(bad)?;
    let nth = n.parse().map_err(|_| bad())?;
    let code = match errno {
        "ENOSPC" => 28,
        "EIO" => 5,
        _ => return Err(bad()),
    };
    Ok(fs::Fault {
        class,
        nth,
        errno: code,
        errno_name: errno.to_string(),
    })
}

fn mount(dir: &Path, args: &[String]) -> Result<()> {
    let trace_path = PathBuf::from(flag(args, "--trace").ok_or("mount needs --trace FILE")?);
    let fault = flag(args, "--fault").map(parse_fault).transpose()?;
    let fault_log = flag(args, "--fault-log").map(PathBuf::from);
    let dir = std::path::absolute(dir).map_err(|e| e.to_string())?;
    let seed = trace::load_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let state = Arc::new(Mutex::new(fs::State::new(
        seed.clone(),
        &dir,
        fault,
        fault_log,
    )));
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("crashfs".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    fuser::mount(fs::CrashFs(state.clone()), &dir, &config)
        .map_err(|e| format!("mount {}: {e}", dir.display()))?;
    let ops = std::mem::take(&mut state.lock().unwrap_or_else(|e| e.into_inner()).ops);
    Trace { seed, ops }
        .save(&trace_path)
        .map_err(|e| format!("{}: {e}", trace_path.display()))
}

fn info(trace: &Trace) -> String {
    let syncs: Vec<String> = trace
        .ops
        .iter()
        .enumerate()
        .filter(|(_, op)| matches!(op, Op::Sync { .. }))
        .map(|(i, _)| i.to_string())
        .collect();
    let mut counts = [0u64; CLASSES.len()];
    for op in &trace.ops {
        counts[op.class()] += 1;
    }
    let counts: Vec<String> = CLASSES
        .iter()
        .zip(counts)
        .map(|(c, n)| format!("\"{c}\": {n}"))
        .collect();
    format!(
        "{{\"ops\": {}, \"syncs\": [{}], \"counts\": {{{}}}}}",
        trace.ops.len(),
        syncs.join(", "),
        counts.join(", ")
    )
}

fn print_ops(trace: &Trace) {
    let mut tree = crash::state_after(trace, 0, Model::Full);
    let mut names = names::Names::of(&tree);
    for (i, op) in trace.ops.iter().enumerate() {
        let at = |dir: u64, name: &std::ffi::OsStr| names.entry(dir, name).display().to_string();
        let of = |ino: u64| names.path(ino).display().to_string();
        let line = match op {
            Op::Create { parent, name, .. } => format!("create {}", at(*parent, name)),
            Op::Link { parent, name, ino } => format!("link {} -> {}", of(*ino), at(*parent, name)),
            Op::Unlink { parent, name } => format!("unlink {}", at(*parent, name)),
            Op::Rename {
                from,
                from_name,
                to,
                to_name,
                flags,
            } => format!(
                "rename{} {} -> {}",
                match *flags {
                    tree::RENAME_NOREPLACE => " NOREPLACE",
                    tree::RENAME_EXCHANGE => " EXCHANGE",
                    _ => "",
                },
                at(*from, from_name),
                at(*to, to_name)
            ),
            Op::Write { ino, offset, data } => {
                format!("write {} @{offset} +{}", of(*ino), data.len())
            }
            Op::Truncate { ino, size } => format!("truncate {} {size}", of(*ino)),
            Op::Sync { ino } => format!("sync {}", of(*ino)),
        };
        println!("{i}\t{line}");
        names.note(op, &tree);
        tree.apply(op);
    }
}
