//! `PreviewStore`: preview pane content, keyed by the digest of its bytes
//! within a workstream and deleted with it.

/// Columns of `previews` without the content.
macro_rules! preview_columns {
    () => {
        "ws_id, preview_id, kind, title, media_type, size_bytes, call_id, created"
    };
}

pub(crate) use preview_columns;

/// The id of `content`: the first 32 hex digits of its SHA-256.
pub(crate) fn preview_id(content: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(content);
    hex::encode(&digest[..16])
}

/// Expands `PreviewStore` for a backend.
macro_rules! impl_preview_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn preview_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::PreviewInfo> {
                use sqlx::Row;
                Ok($crate::types::PreviewInfo {
                    ws_id: r.try_get("ws_id")?,
                    preview_id: r.try_get("preview_id")?,
                    kind: r.try_get("kind")?,
                    title: r.try_get("title")?,
                    media_type: r.try_get("media_type")?,
                    size_bytes: r.try_get("size_bytes")?,
                    call_id: r.try_get("call_id")?,
                    created: r.try_get("created")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::PreviewStore for $store {
            async fn save_preview(
                &self,
                p: &$crate::types::NewPreview,
            ) -> $crate::error::Result<$crate::types::PreviewInfo> {
                use sqlx::Row;
                let id = $crate::ops::previews::preview_id(&p.content);
                let mut tx = self.begin_write().await?;
                let used: i64 = sqlx::query(
                    "SELECT CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) AS used FROM previews \
                     WHERE ws_id = $1 AND preview_id <> $2",
                )
                .bind(&p.ws_id)
                .bind(&id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("used")?;
                let limit = $crate::types::MAX_PREVIEW_BYTES_PER_WORKSTREAM;
                let total = usize::try_from(used).unwrap_or(usize::MAX).saturating_add(p.content.len());
                if total > limit {
                    return Err($crate::error::StorageError::TooLarge {
                        field: "the workstream's previews",
                        size: total,
                        limit,
                    });
                }
                let row = sqlx::query(concat!(
                    "INSERT INTO previews (ws_id, preview_id, kind, title, media_type, size_bytes, content, call_id, created) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                     ON CONFLICT (ws_id, preview_id) DO UPDATE SET title = excluded.title, kind = excluded.kind, \
                     media_type = excluded.media_type, call_id = excluded.call_id RETURNING ",
                    $crate::ops::previews::preview_columns!()
                ))
                .bind(&p.ws_id)
                .bind(&id)
                .bind(&p.kind)
                .bind(&p.title)
                .bind(&p.media_type)
                .bind(i64::try_from(p.content.len()).unwrap_or(i64::MAX))
                .bind(&p.content)
                .bind(&p.call_id)
                .bind($crate::util::now())
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| $crate::error::classify(e, &p.ws_id))?;
                let info = Self::preview_from_row(&row)?;
                tx.commit().await?;
                Ok(info)
            }

            async fn get_preview(
                &self,
                ws_id: &str,
                preview_id: &str,
            ) -> $crate::error::Result<Option<($crate::types::PreviewInfo, Vec<u8>)>> {
                use sqlx::Row;
                let row = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::previews::preview_columns!(),
                    ", content FROM previews WHERE ws_id = $1 AND preview_id = $2"
                ))
                .bind(ws_id)
                .bind(preview_id)
                .fetch_optional(&self.pool)
                .await?;
                match row {
                    Some(r) => Ok(Some((Self::preview_from_row(&r)?, r.try_get("content")?))),
                    None => Ok(None),
                }
            }

            async fn list_previews(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Vec<$crate::types::PreviewInfo>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::previews::preview_columns!(),
                    " FROM previews WHERE ws_id = $1 ORDER BY created, preview_id"
                ))
                .bind(ws_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::preview_from_row).collect()
            }
        }
    };
}

pub(crate) use impl_preview_store;
