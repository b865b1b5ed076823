//! Command-line arguments turned into the library's options: the engine,
//! a run key without a rule file.

use super::args::AuditArgs;
use crate::engine::{Engine, EngineOptions};
use crate::error::Error;
use crate::runkey::{self, RunKey};

pub(super) fn engine_options(a: &AuditArgs) -> Result<EngineOptions, Error> {
    if let Engine::Ballista(_) = &a.engine {
        if a.memory_limit.is_some() {
            return Err(Error::Usage(
                "--memory-limit bounds the local engine only; on Ballista each executor's memory \
                 is bounded by its own pool (`dqgate ballista executor --memory-pool-size`)"
                    .into(),
            ));
        }
    }
    Ok(EngineOptions {
        threads: a.threads,
        memory_limit: a.memory_limit,
        scan_only: a.scan_only,
        engine: a.engine.clone(),
        forced_key_strategy: crate::hooks::key_strategy()
            .and_then(|s| crate::plan::keys::Forced::parse(&s)),
        fingerprint_bits: crate::hooks::fingerprint_bits(),
    })
}

/// With a Ballista engine: the scheduler accepts connections. Checked once
/// the rule file, run key and staged footers are known good, so those errors
/// come first, as with the local engine.
pub(super) fn reach_engine(a: &AuditArgs) -> Result<(), Error> {
    match &a.engine {
        Engine::Local => Ok(()),
        Engine::Ballista(scheduler) => Ok(crate::exec::ballista::reach(scheduler)?),
    }
}

/// A run key without a rule file (verify, rollback): validated, in the order given.
pub(super) fn free_run_key(args: &[String]) -> Result<RunKey, Error> {
    let keys = args
        .iter()
        .map(|a| runkey::parse_pair(a).map(|(k, _)| k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunKey::parse(args, &keys)?)
}
