//! Opening staged files wherever they are: a local directory, or an
//! object-store prefix listed and its footers fetched with ranged reads.
//! Both end in [`StagedInput::assemble`], so the same files give the same
//! input and fingerprint wherever they live.

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectMeta;

use super::error::InputError;
use super::input::{RawFooter, StagedInput};
use super::remote::{Location, Remote, CONCURRENT_FOOTERS};

impl StagedInput {
    /// Opens a staged location: a local directory, or an object-store prefix
    /// (listed and its footers fetched with ranged reads).
    pub async fn open_at(location: &Location) -> Result<StagedInput, InputError> {
        match location {
            Location::Local(dir) => StagedInput::open(dir),
            Location::Remote(remote) => {
                Ok(StagedInput::discover(remote).await?.with_hive_columns())
            }
        }
    }

    /// Lists the prefix, reads and checks every footer, fingerprints.
    pub async fn discover(remote: &Remote) -> Result<StagedInput, InputError> {
        let found = remote.list_files().await?;
        StagedInput::open_listed(remote, found).await
    }

    /// The input of the objects `rels` below the prefix (a HEAD each, then
    /// the footer reads of discovery), e.g. the files a Delta log names.
    pub async fn open_files(remote: &Remote, rels: &[String]) -> Result<StagedInput, InputError> {
        let found = futures::stream::iter(rels)
            .map(|rel| async move {
                match remote.head(rel).await? {
                    Some(meta) => Ok((rel.clone(), meta)),
                    None => Err(InputError::Remote {
                        url: remote.name_of(rel),
                        reason: "no such object".into(),
                    }),
                }
            })
            .buffered(CONCURRENT_FOOTERS)
            .try_collect::<Vec<_>>()
            .await?;
        if found.is_empty() {
            return Err(InputError::NoFiles(remote.url.to_string()));
        }
        StagedInput::open_listed(remote, found).await
    }

    async fn open_listed(
        remote: &Remote,
        found: Vec<(String, ObjectMeta)>,
    ) -> Result<StagedInput, InputError> {
        let footers = futures::stream::iter(found)
            .map(|(rel, meta)| async move {
                let footer = remote.read_footer(&rel, &meta).await?;
                Ok::<_, InputError>(RawFooter {
                    rel,
                    bytes: meta.size,
                    footer,
                })
            })
            .buffered(CONCURRENT_FOOTERS)
            .try_collect::<Vec<_>>()
            .await?;
        StagedInput::assemble(Location::Remote(remote.clone()), footers)
    }
}
