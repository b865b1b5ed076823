//! A Delta table over dqgate's own stores: the table builder (fsynced puts
//! on a local file system, put-if-absent commits on an object store), and
//! whether a root holds a Delta log.

use std::sync::{Arc, Once};

use deltalake_core::logstore::{
    default_logstore, logstore_factories, LogStore, LogStoreFactory, StorageConfig,
};
use deltalake_core::DeltaTableBuilder;
use object_store::ObjectStore;
use url::Url;

use super::durable::DurableLocal;
use crate::publish::error::PublishError;
use crate::publish::root::{table_error, Root};
use crate::staged::Remote;

impl Root {
    /// A builder for the Delta table at the root. On an object store the
    /// table is opened over dqgate's own store (configured like the audit's),
    /// with the log store that commits by put-if-absent.
    pub fn builder(&self) -> Result<DeltaTableBuilder, PublishError> {
        match self {
            Root::Local(dir) => {
                // Over a store whose puts are fsynced: object_store's local
                // file system never syncs a commit entry.
                let url = Url::from_directory_path(dir)
                    .map_err(|()| self.error("not an absolute path"))?;
                let store: Arc<dyn ObjectStore> = Arc::new(DurableLocal::default());
                Ok(DeltaTableBuilder::from_url(url.clone())
                    .map_err(|e| self.error(e))?
                    .with_storage_backend(store, url))
            }
            Root::Remote(r) => {
                register_log_store(r.url.scheme());
                let store: Arc<dyn ObjectStore> = r.store.clone();
                Ok(DeltaTableBuilder::from_url(r.url.clone())
                    .map_err(|e| self.error(e))?
                    .with_storage_backend(store, r.url.clone()))
            }
        }
    }

    /// Whether the root holds a Delta log (`_delta_log/`).
    pub async fn has_log(&self) -> Result<bool, PublishError> {
        match self {
            Root::Local(dir) => Ok(dir.join("_delta_log").is_dir()),
            Root::Remote(r) => self.remote_entries(r, "_delta_log").await.map(|n| n > 0),
        }
    }

    /// Whether anything at all is at the root.
    pub async fn occupied(&self) -> Result<bool, PublishError> {
        match self {
            Root::Local(dir) => Ok(std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())),
            Root::Remote(r) => self.remote_entries(r, "").await.map(|n| n > 0),
        }
    }

    /// Objects and common prefixes directly below `rel`.
    async fn remote_entries(&self, r: &Remote, rel: &str) -> Result<usize, PublishError> {
        let prefix = if rel.is_empty() {
            r.prefix.clone()
        } else {
            r.path_of(rel)
        };
        let listed = r
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(|e| table_error(&r.name_of(rel), e))?;
        Ok(listed.objects.len() + listed.common_prefixes.len())
    }
}

/// Delta's default log store commits with a put-if-absent (`PutMode::Create`)
/// of the next log entry, which every object store here supports natively;
/// registering it for a scheme lets a table on that store be opened over
/// dqgate's own store.
fn register_log_store(scheme: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for s in ["s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss"] {
            if let Ok(url) = Url::parse(&format!("{s}://")) {
                logstore_factories().insert(url, Arc::new(PutIfAbsent));
            }
        }
    });
    debug_assert!(
        Url::parse(&format!("{scheme}://")).is_ok_and(|u| logstore_factories().contains_key(&u))
    );
}

struct PutIfAbsent;

impl LogStoreFactory for PutIfAbsent {
    fn with_options(
        &self,
        prefixed_store: deltalake_core::logstore::ObjectStoreRef,
        root_store: deltalake_core::logstore::ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> deltalake_core::DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}
