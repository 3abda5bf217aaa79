//! `SkillStore`: skills saved in the database (`prompt_templates`, kind
//! `skill`): every save is the next version of its name; the catalogue reads
//! the latest version of each.

/// Columns of `prompt_templates` as a skill.
macro_rules! skill_columns {
    () => {
        "template_id, name, version, description, content, created, created_by"
    };
}

pub(crate) use skill_columns;

/// A unique-key collision or a serialization failure: the write raced
/// another and may be tried again.
pub(crate) fn is_write_conflict(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            db.is_unique_violation() || db.code().as_deref() == Some("40001")
        }
        _ => false,
    }
}

/// Expands `SkillStore` for a backend whose store type has a `pool` field and
/// a `begin_write` method.
macro_rules! impl_skill_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn skill_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::SkillRecord> {
                use sqlx::Row;
                Ok($crate::types::SkillRecord {
                    template_id: r.try_get("template_id")?,
                    name: r.try_get("name")?,
                    version: r.try_get("version")?,
                    description: r.try_get("description")?,
                    content: r.try_get("content")?,
                    created: r.try_get("created")?,
                    created_by: r.try_get("created_by")?,
                })
            }

            async fn save_skill_once(
                &self,
                s: &$crate::types::NewSkill,
            ) -> $crate::error::Result<$crate::types::SkillRecord> {
                let mut tx = self.begin_write().await?;
                let last: Option<i64> = sqlx::query_scalar(
                    "SELECT CAST(MAX(version) AS BIGINT) FROM prompt_templates WHERE name = $1",
                )
                .bind(&s.name)
                .fetch_one(&mut *tx)
                .await?;
                let row = sqlx::query(concat!(
                    "INSERT INTO prompt_templates (template_id, name, version, kind, description, content, created, created_by) \
                     VALUES ($1, $2, $3, 'skill', $4, $5, $6, $7) RETURNING ",
                    $crate::ops::skills::skill_columns!()
                ))
                .bind($crate::util::random_hex(16))
                .bind(&s.name)
                .bind(last.unwrap_or(0) + 1)
                .bind(&s.description)
                .bind(&s.content)
                .bind($crate::util::now())
                .bind(&s.created_by)
                .fetch_one(&mut *tx)
                .await?;
                let rec = Self::skill_from_row(&row)?;
                tx.commit().await?;
                Ok(rec)
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::SkillStore for $store {
            async fn save_skill(
                &self,
                s: &$crate::types::NewSkill,
            ) -> $crate::error::Result<$crate::types::SkillRecord> {
                $crate::ops::skills::check_skill(s)?;
                // Two saves of one skill at once read the same last version;
                // the second insert then collides (UNIQUE (name, version)) and
                // is tried again on the version the first one took.
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    match self.save_skill_once(s).await {
                        Err($crate::error::StorageError::Database(e))
                            if attempt < 5 && $crate::ops::skills::is_write_conflict(&e) => {}
                        other => return other,
                    }
                }
            }

            async fn latest_skills(&self) -> $crate::error::Result<Vec<$crate::types::SkillRecord>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::skills::skill_columns!(),
                    " FROM prompt_templates p WHERE kind = 'skill' AND version = \
                     (SELECT MAX(version) FROM prompt_templates q WHERE q.name = p.name AND q.kind = 'skill') \
                     ORDER BY name"
                ))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::skill_from_row).collect()
            }

            async fn skill_versions(&self, name: &str) -> $crate::error::Result<Vec<$crate::types::SkillRecord>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::skills::skill_columns!(),
                    " FROM prompt_templates WHERE kind = 'skill' AND name = $1 ORDER BY version DESC"
                ))
                .bind(name)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::skill_from_row).collect()
            }

            async fn get_skill(
                &self,
                name: &str,
                version: Option<i64>,
            ) -> $crate::error::Result<Option<$crate::types::SkillRecord>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::skills::skill_columns!(),
                    " FROM prompt_templates WHERE kind = 'skill' AND name = $1 AND ($2 IS NULL OR version = $2) \
                     ORDER BY version DESC LIMIT 1"
                ))
                .bind(name)
                .bind(version)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::skill_from_row).transpose()
            }

            async fn delete_skill(&self, name: &str) -> $crate::error::Result<u64> {
                Ok(sqlx::query("DELETE FROM prompt_templates WHERE kind = 'skill' AND name = $1")
                    .bind(name)
                    .execute(&self.pool)
                    .await?
                    .rows_affected())
            }
        }
    };
}

pub(crate) use impl_skill_store;

/// Checks a skill before it is saved.
pub(crate) fn check_skill(s: &crate::types::NewSkill) -> crate::error::Result<()> {
    use crate::error::StorageError;
    if s.name.is_empty()
        || s.name.len() > 64
        || !s
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(StorageError::InvalidInput(
            "a skill name has 1-64 letters, digits, `-` or `_`".into(),
        ));
    }
    if s.content.len() > crate::types::MAX_CONTENT_BYTES {
        return Err(StorageError::TooLarge {
            field: "content",
            size: s.content.len(),
            limit: crate::types::MAX_CONTENT_BYTES,
        });
    }
    if [&s.name, &s.description, &s.content]
        .iter()
        .any(|v| v.contains('\0'))
    {
        return Err(StorageError::InvalidInput(
            "skill fields must not contain NUL".into(),
        ));
    }
    Ok(())
}
