//! The one DataFusion session configuration every stage shares.
//!
//! Rule-file semantics fix a few settings: column names are case-sensitive
//! (so SQL identifier normalisation is off), a timestamp without offset is UTC
//! (so the session time zone is UTC), and results must not depend on the host.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

/// Engine settings a run may change.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Threads for scans and aggregates; `None` = all cores.
    pub threads: Option<usize>,
    /// Bound on DataFusion's memory pool in bytes; operators that can spill
    /// (grouped aggregates, sorts) spill to disk beyond it.
    pub memory_limit: Option<usize>,
    /// Never answer metrics from Parquet footers (neither dqgate's footer path
    /// nor DataFusion's statistics); scan everything.
    pub scan_only: bool,
    /// Where the plans run.
    pub engine: Engine,
    /// For tests: run every key check with this strategy of the key engine
    /// (`DQGATE_TEST_KEY_STRATEGY` on the command line).
    pub forced_key_strategy: Option<crate::plan::keys::Forced>,
    /// For tests: keep only this many bits of each key fingerprint, so that
    /// many keys collide (`DQGATE_TEST_FINGERPRINT_BITS`).
    pub fingerprint_bits: Option<u32>,
}

/// Where the plans run (`--engine`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Engine {
    /// In this process (`--engine local`, the default).
    #[default]
    Local,
    /// On an Apache DataFusion Ballista cluster, by its scheduler's
    /// `HOST:PORT` (`--engine ballista://HOST:PORT`).
    Ballista(String),
}

impl Engine {
    /// Parses `local` or `ballista://HOST:PORT`.
    pub fn parse(s: &str) -> Result<Engine, crate::exec::ballista::EngineError> {
        if s == "local" {
            return Ok(Engine::Local);
        }
        crate::exec::ballista::scheduler_address(s).map(Engine::Ballista)
    }
}

/// A fresh session with dqgate's settings.
pub fn session(opts: &EngineOptions) -> Result<SessionContext, datafusion::error::DataFusionError> {
    let threads = opts
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let mut config = SessionConfig::new()
        .with_target_partitions(threads)
        .with_information_schema(false)
        .set_bool("datafusion.sql_parser.enable_ident_normalization", false)
        // With statistics, DataFusion itself answers count/min/max from the
        // footers when a whole query allows it; `scan_only` must really scan.
        .set_bool("datafusion.execution.collect_statistics", !opts.scan_only);
    config.options_mut().execution.time_zone = Some("+00:00".to_string());
    let mut runtime = RuntimeEnvBuilder::new();
    if let Some(limit) = opts.memory_limit {
        // Fair shares: each spilling operator (one per partition) may hold
        // limit / n, so one partition's hash table cannot starve another's
        // into failing where it could have spilled.
        let pool = TrackConsumersPool::new(
            FairSpillPool::new(limit),
            std::num::NonZeroUsize::new(5).expect("5 is not zero"),
        );
        runtime = runtime.with_memory_pool(Arc::new(pool));
        // A spilling operator first reserves room to sort and merge what it
        // spills (10 MiB by default): under a small limit that reservation
        // alone would exhaust the pool, so it scales with the limit.
        let execution = &mut config.options_mut().execution;
        execution.sort_spill_reservation_bytes =
            execution.sort_spill_reservation_bytes.min(limit / 16);
    }
    let ctx = SessionContext::new_with_config_rt(config, Arc::new(runtime.build()?));
    match &opts.engine {
        Engine::Local => {
            // Local files through reused buffers (see `exec::pooled`).
            let file = url::Url::parse("file://").expect("a valid URL");
            ctx.register_object_store(&file, Arc::new(crate::exec::pooled::PooledLocal::new()));
            Ok(ctx)
        }
        Engine::Ballista(scheduler) => crate::exec::ballista::client(ctx, scheduler),
    }
}

/// Turns DataFusion's own use of file statistics off when `schema` has a
/// floating-point column. Parquet writers leave NaN out of float min/max, and
/// DataFusion 55 replaces a column whose file statistics say min = max (and
/// no nulls) with that one value: a file holding 4.25, NaN, NaN would be read
/// as 4.25 three times. dqgate's own footer answers never use float bounds.
pub fn distrust_float_statistics(ctx: &SessionContext, schema: &Schema) {
    let floating = |t: &DataType| match t {
        DataType::Dictionary(_, v) => v.is_floating(),
        t => t.is_floating(),
    };
    if schema.fields().iter().any(|f| floating(f.data_type())) {
        let state = ctx.state_ref();
        let mut state = state.write();
        state
            .config_mut()
            .options_mut()
            .execution
            .collect_statistics = false;
    }
}
