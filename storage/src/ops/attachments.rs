//! `AttachmentStore`: uploaded attachment blobs, stored with their workstream
//! and consumed by a send, written once and expanded for each backend (see the
//! `ops` module docs).

/// Columns of `attachments` returned as metadata (never `content`, the bytes,
/// which only the queries that need them select).
macro_rules! attachment_columns {
    () => {
        "attachment_id, ws_id, user_id, filename, mime_type, kind, size_bytes, created, consumed"
    };
}

pub(crate) use attachment_columns;

/// Checks an attachment before it is stored.
pub(crate) fn check_attachment(a: &crate::types::NewAttachment) -> crate::error::Result<()> {
    use crate::error::StorageError;
    if a.content.len() > crate::types::MAX_ATTACHMENT_BYTES {
        return Err(StorageError::TooLarge {
            field: "attachment",
            size: a.content.len(),
            limit: crate::types::MAX_ATTACHMENT_BYTES,
        });
    }
    for (name, v) in [
        ("filename", &a.filename),
        ("mime_type", &a.mime_type),
        ("kind", &a.kind),
    ] {
        if v.is_empty() || v.len() > 255 || v.contains('\0') {
            return Err(StorageError::InvalidInput(format!(
                "attachment {name} must be 1-255 bytes without NUL"
            )));
        }
    }
    Ok(())
}

/// Expands `AttachmentStore` for a backend whose store type has a `pool` field.
macro_rules! impl_attachment_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn attachment_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::Attachment> {
                use sqlx::Row;
                Ok($crate::types::Attachment {
                    attachment_id: r.try_get("attachment_id")?,
                    ws_id: r.try_get("ws_id")?,
                    user_id: r.try_get("user_id")?,
                    filename: r.try_get("filename")?,
                    mime_type: r.try_get("mime_type")?,
                    kind: r.try_get("kind")?,
                    size_bytes: r.try_get("size_bytes")?,
                    created: r.try_get("created")?,
                    consumed: r.try_get("consumed")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::AttachmentStore for $store {
            async fn save_attachment(
                &self,
                a: &$crate::types::NewAttachment,
            ) -> $crate::error::Result<$crate::types::Attachment> {
                $crate::ops::attachments::check_attachment(a)?;
                let row = sqlx::query(concat!(
                    "INSERT INTO attachments (attachment_id, ws_id, user_id, filename, mime_type, kind, size_bytes, content, created) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ",
                    $crate::ops::attachments::attachment_columns!()
                ))
                .bind($crate::util::random_hex(16))
                .bind(&a.ws_id)
                .bind(&a.user_id)
                .bind(&a.filename)
                .bind(&a.mime_type)
                .bind(&a.kind)
                .bind(a.content.len() as i64)
                .bind(&a.content)
                .bind($crate::util::now())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| match &e {
                    sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
                        $crate::error::StorageError::UnknownWorkstream(a.ws_id.clone())
                    }
                    _ => e.into(),
                })?;
                Self::attachment_from_row(&row)
            }

            async fn get_attachment(
                &self,
                ws_id: &str,
                attachment_id: &str,
            ) -> $crate::error::Result<Option<($crate::types::Attachment, Vec<u8>)>> {
                let row = sqlx::query(concat!(
                    "SELECT ", $crate::ops::attachments::attachment_columns!(), ", content FROM attachments WHERE ws_id = $1 AND attachment_id = $2"
                ))
                .bind(ws_id)
                .bind(attachment_id)
                .fetch_optional(&self.pool)
                .await?;
                match row {
                    None => Ok(None),
                    Some(r) => {
                        use sqlx::Row;
                        let content: Vec<u8> = r.try_get("content")?;
                        Ok(Some((Self::attachment_from_row(&r)?, content)))
                    }
                }
            }

            async fn list_attachments(
                &self,
                ws_id: &str,
                pending_only: bool,
            ) -> $crate::error::Result<Vec<$crate::types::Attachment>> {
                let sql = if pending_only {
                    concat!("SELECT ", $crate::ops::attachments::attachment_columns!(), " FROM attachments WHERE ws_id = $1 AND consumed IS NULL ORDER BY created, attachment_id")
                } else {
                    concat!("SELECT ", $crate::ops::attachments::attachment_columns!(), " FROM attachments WHERE ws_id = $1 ORDER BY created, attachment_id")
                };
                let rows = sqlx::query(sql).bind(ws_id).fetch_all(&self.pool).await?;
                rows.iter().map(Self::attachment_from_row).collect()
            }

            async fn delete_attachment(
                &self,
                ws_id: &str,
                attachment_id: &str,
            ) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "DELETE FROM attachments WHERE ws_id = $1 AND attachment_id = $2 AND consumed IS NULL",
                )
                .bind(ws_id)
                .bind(attachment_id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn consume_attachments(
                &self,
                ws_id: &str,
                ids: &[String],
            ) -> $crate::error::Result<Vec<($crate::types::Attachment, Vec<u8>)>> {
                let mut out = Vec::new();
                let now = $crate::util::now();
                for id in ids {
                    // Claim first so two sends cannot both consume one attachment.
                    let n = sqlx::query(
                        "UPDATE attachments SET consumed = $1 WHERE ws_id = $2 AND attachment_id = $3 AND consumed IS NULL",
                    )
                    .bind(&now)
                    .bind(ws_id)
                    .bind(id)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                    if n == 1
                        && let Some(found) = self.get_attachment(ws_id, id).await?
                    {
                        out.push(found);
                    }
                }
                Ok(out)
            }
        }
    };
}

pub(crate) use impl_attachment_store;
