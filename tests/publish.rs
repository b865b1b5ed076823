//! Integration tests of write-audit-publish (`spec/publish.md`), on real
//! directories and real Parquet files. One test binary; one module per
//! concern.

#[path = "publish/cli.rs"]
mod cli;
#[path = "publish/common.rs"]
mod common;
#[path = "publish/crash.rs"]
mod crash;
#[path = "publish/delta.rs"]
mod delta;
#[path = "publish/flow.rs"]
mod flow;
#[path = "publish/isolation.rs"]
mod isolation;
#[path = "publish/paths.rs"]
mod paths;
#[path = "publish/race.rs"]
mod race;
#[path = "publish/rollback_gc.rs"]
mod rollback_gc;
#[path = "publish/verify.rs"]
mod verify;
