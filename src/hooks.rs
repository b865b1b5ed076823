//! Test hooks: the environment variables through which the crash, race and
//! cross-engine tests steer a real `dqgate` process (stop it at a step, pause
//! it, line several up, force a key strategy).
//!
//! They exist only in a build with the `test-hooks` feature, which the test
//! build turns on (the crate's dev-dependency on itself) and a release build
//! leaves off: there every hook is an empty function the compiler removes,
//! and the binary holds none of the `DQGATE_TEST_*` names. This is a leaf
//! module: it names nothing else of the crate.

/// Marks the start of step `name` (of a swap, a commit, an audit's read of
/// other partitions): appends `name` to the file named by
/// `DQGATE_TEST_PHASE_LOG` (to tell at which step a publish was killed),
/// aborts the process on the spot if `DQGATE_TEST_CRASH_AT` names this step
/// (a crash with no clean-up, like SIGKILL), and sleeps there if
/// `DQGATE_TEST_PAUSE_AT=STEP:MS` names it, so that a test can SIGKILL the
/// process inside it.
pub fn phase(name: &str) {
    #[cfg(feature = "test-hooks")]
    {
        use std::io::Write as _;
        if let Some(path) = std::env::var_os("DQGATE_TEST_PHASE_LOG") {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
            {
                let _ = writeln!(f, "{name}");
            }
        }
        if std::env::var_os("DQGATE_TEST_CRASH_AT").is_some_and(|p| p == name) {
            std::process::abort();
        }
        if let Some(ms) = std::env::var("DQGATE_TEST_PAUSE_AT").ok().and_then(|v| {
            let (step, ms) = v.split_once(':')?;
            (step == name).then(|| ms.parse::<u64>().ok()).flatten()
        }) {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
    #[cfg(not(feature = "test-hooks"))]
    let _ = name;
}

/// When `DQGATE_TEST_BARRIER` names a directory, a publish that has finished
/// its first audit leaves a file there and waits (at most 20 s) until
/// `DQGATE_TEST_BARRIER_N` (default 2) publishes have, so that they all
/// audit the same table state before any of them swaps.
pub fn barrier() {
    #[cfg(feature = "test-hooks")]
    {
        let Some(dir) = std::env::var_os("DQGATE_TEST_BARRIER").map(std::path::PathBuf::from)
        else {
            return;
        };
        let n = std::env::var("DQGATE_TEST_BARRIER_N")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(2);
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(std::process::id().to_string()), b"");
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(20) {
            if std::fs::read_dir(&dir).map_or(0, |d| d.count()) >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// Sleeps `DQGATE_TEST_DELTA_PAUSE_MS` milliseconds after a Delta publish
/// read the table and before it copies and commits, so that two publishes
/// audit against the same table version.
pub fn delta_pause() {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("DQGATE_TEST_DELTA_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// The variable `$name`, parsed: `None` when it is unset or does not
/// parse, and always in a build without test hooks, which then holds no
/// `DQGATE_TEST_*` name (a function taking the name would keep it).
#[cfg(feature = "test-hooks")]
macro_rules! parsed {
    ($name:literal) => {
        std::env::var($name).ok().and_then(|s| s.parse().ok())
    };
}
#[cfg(not(feature = "test-hooks"))]
macro_rules! parsed {
    ($name:literal) => {
        None
    };
}

/// `DQGATE_TEST_KEY_STRATEGY`: the key engine strategy every key check is
/// forced to use (its name, parsed by the planner).
pub fn key_strategy() -> Option<String> {
    #[cfg(feature = "test-hooks")]
    return std::env::var("DQGATE_TEST_KEY_STRATEGY").ok();
    #[cfg(not(feature = "test-hooks"))]
    None
}

/// `DQGATE_TEST_FINGERPRINT_BITS`: how many bits of each key fingerprint to
/// keep, so that many keys collide.
pub fn fingerprint_bits() -> Option<u32> {
    parsed!("DQGATE_TEST_FINGERPRINT_BITS")
}

/// `DQGATE_TEST_LOOKUP_KEYS`: the most distinct keys the fingerprinted
/// reference lookup probes in place, so that small files take the spread
/// lookup too.
pub fn lookup_keys() -> Option<usize> {
    parsed!("DQGATE_TEST_LOOKUP_KEYS")
}

/// `DQGATE_TEST_PROBE_ROWS`: the most staged rows a fingerprinted join
/// holds in its in-place table, so that small files take the spread join
/// of `unique(k) across published` too.
pub fn probe_rows() -> Option<u64> {
    parsed!("DQGATE_TEST_PROBE_ROWS")
}

/// `DQGATE_TEST_SPREAD_BYTES`: the most bytes a spread join's records hold
/// in memory before they are written to disk, so that small files take
/// that path too.
pub fn spread_bytes() -> Option<usize> {
    parsed!("DQGATE_TEST_SPREAD_BYTES")
}

/// `DQGATE_TEST_KEEP_BYTES`: the most key-column bytes a fingerprint scan
/// keeps of local files (instead of 64 MiB), so that small files are read
/// as large ones are: `0` keeps nothing, and a single text key is then
/// hashed from its pages. Set to any value, it also keeps every
/// dictionary page across row groups, not only those of 4 MiB or more.
pub fn keep_bytes() -> Option<usize> {
    parsed!("DQGATE_TEST_KEEP_BYTES")
}

/// `DQGATE_TEST_BY_VALUE`: the fewest candidates for which the
/// verification of a text key read page by page takes its rows by value
/// (dictionary rows tallied, plain values in batches), so that small files
/// take that path too: `0` always.
pub fn by_value() -> Option<usize> {
    parsed!("DQGATE_TEST_BY_VALUE")
}

/// `DQGATE_TEST_PLACES`: `0` keeps a composite's first pass from noting
/// where each row went, so that its verification reads every row.
pub fn places() -> Option<usize> {
    parsed!("DQGATE_TEST_PLACES")
}

/// `DQGATE_TEST_SPILL_CANDIDATES`: the fewest candidates whose
/// verification writes its rows to disk by round even when their exact
/// keys fit the budget (default 262,144).
pub fn spill_candidates() -> Option<usize> {
    parsed!("DQGATE_TEST_SPILL_CANDIDATES")
}

/// `DQGATE_TEST_SORTED_KEYS`: the most keys a run of a text key's first
/// pass keeps in memory in its stretches in order before it writes them to
/// disk, or gives them up with no disk to write to (`0`: it keeps none),
/// so that small files take those paths at any point, or never keep them.
pub fn sorted_keys() -> Option<usize> {
    parsed!("DQGATE_TEST_SORTED_KEYS")
}

/// `DQGATE_TEST_FOOTER_ORDER`: `0` makes a text key's first pass over
/// files whose footers say they are in order keep its fingerprints,
/// tables and stretches all along as for any other files, instead of
/// first counting the values in order alone.
pub fn footer_order() -> Option<usize> {
    parsed!("DQGATE_TEST_FOOTER_ORDER")
}

/// `DQGATE_TEST_EXACT_VALUES`: the most values a run of a text key's
/// first pass tables before it gives its table up (`0`: no table), so
/// that small files give it up at any point, or never take it.
pub fn exact_values() -> Option<usize> {
    parsed!("DQGATE_TEST_EXACT_VALUES")
}

/// `DQGATE_TEST_BIN_VALUES`: the values a run of a text key's first pass
/// tables before it bins them instead, whatever its estimates (`0`: it
/// never bins them), so that small files take the bins at any point.
pub fn bin_values() -> Option<usize> {
    parsed!("DQGATE_TEST_BIN_VALUES")
}

/// `DQGATE_TEST_BIN_BYTES`: the most bytes a run's bins of a text key's
/// exact values hold before they are written to disk (or given up), so
/// that small files take those paths whatever their values' lengths.
pub fn bin_bytes() -> Option<usize> {
    parsed!("DQGATE_TEST_BIN_BYTES")
}

/// `DQGATE_TEST_OUTSIZED_BIN`: how many times the other bins' mean room a
/// bin of a text key's exact values must reach before it is tabled in
/// place (`1`: any bin above the mean, so that any layout takes that path).
pub fn outsized_bin() -> Option<usize> {
    parsed!("DQGATE_TEST_OUTSIZED_BIN")
}

/// `DQGATE_TEST_SAMPLE_ROWS`: how many staged keys `across published`
/// compares with the published footers first, so that small files take
/// that sample too (from 16 times as many staged rows).
pub fn sample_rows() -> Option<usize> {
    parsed!("DQGATE_TEST_SAMPLE_ROWS")
}

/// Whether the failed-rows passes push their predicates into the Parquet
/// scans (always, but `DQGATE_TEST_FAILED_ROWS_PUSHDOWN=0` turns it off for
/// the benchmark's comparison).
pub fn failed_rows_pushdown() -> bool {
    #[cfg(feature = "test-hooks")]
    return std::env::var("DQGATE_TEST_FAILED_ROWS_PUSHDOWN").map_or(true, |v| v != "0");
    #[cfg(not(feature = "test-hooks"))]
    true
}

/// `DQGATE_TEST_BIN_ROWS`: a run of a composite key's first pass bins
/// its keys, whatever its estimate, from the row group after it watched
/// this many counted rows less one (`1`: from its first row group; `0`:
/// it never bins them), so that small files take the bins from any row
/// group on.
pub fn bin_rows() -> Option<usize> {
    parsed!("DQGATE_TEST_BIN_ROWS")
}

/// `DQGATE_TEST_MOST_CANDIDATES`: the most repeated fingerprints the count
/// of a composite walked page by page keeps (past them it keeps none, and
/// every row is read again into bins), instead of the memory limit's.
pub fn most_candidates() -> Option<u64> {
    parsed!("DQGATE_TEST_MOST_CANDIDATES")
}
