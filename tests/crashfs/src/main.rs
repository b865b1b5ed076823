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
    let mut names = std::collections::HashMap::new();
    for (ino, node) in &trace.seed.nodes {
        for (name, child) in node.entries().into_iter().flatten() {
            names.insert(*child, (*ino, name.clone()));
        }
    }
    let path = |names: &std::collections::HashMap<_, _>, dir: u64, name: &std::ffi::OsStr| {
        trace::describe(names, dir).join(name).display().to_string()
    };
    for (i, op) in trace.ops.iter().enumerate() {
        let line = match op {
            Op::Create {
                parent, name, ino, ..
            } => {
                let s = format!("create {}", path(&names, *parent, name));
                names.insert(*ino, (*parent, name.clone()));
                s
            }
            Op::Link { parent, name, ino } => {
                let s = format!(
                    "link {} -> {}",
                    trace::describe(&names, *ino).display(),
                    path(&names, *parent, name)
                );
                names.insert(*ino, (*parent, name.clone()));
                s
            }
            Op::Unlink { parent, name } => format!("unlink {}", path(&names, *parent, name)),
            Op::Rename {
                from,
                from_name,
                to,
                to_name,
                flags,
            } => {
                let s = format!(
                    "rename{} {} -> {}",
                    match flags {
                        1 => " NOREPLACE",
                        2 => " EXCHANGE",
                        _ => "",
                    },
                    path(&names, *from, from_name),
                    path(&names, *to, to_name)
                );
                let moved: Vec<u64> = names
                    .iter()
                    .filter(|(_, (p, n))| {
                        (*p == *from && n == from_name) || (*p == *to && n == to_name)
                    })
                    .map(|(i, _)| *i)
                    .collect();
                for ino in moved {
                    let at_src = names[&ino] == (*from, from_name.clone());
                    if at_src {
                        names.insert(ino, (*to, to_name.clone()));
                    } else if *flags == 2 {
                        names.insert(ino, (*from, from_name.clone()));
                    }
                }
                s
            }
            Op::Write { ino, offset, data } => format!(
                "write {} @{offset} +{}",
                trace::describe(&names, *ino).display(),
                data.len()
            ),
            Op::Truncate { ino, size } => {
                format!(
                    "truncate {} {size}",
                    trace::describe(&names, *ino).display()
                )
            }
            Op::Sync { ino } => format!("sync {}", trace::describe(&names, *ino).display()),
        };
        println!("{i}\t{line}");
    }
}
