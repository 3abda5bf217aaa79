//! `MemoryStore`: structured memories (upsert by name + scope + scope_id, read
//! with access counting, list, word search), written once and expanded for each
//! backend (see the `ops` module docs).

/// Columns of `structured_memories`; `type` is decoded into `Memory::memory_type`.
macro_rules! memory_columns {
    () => {
        "memory_id, name, description, type, scope, scope_id, content, created, updated, last_accessed, access_count"
    };
}

pub(crate) use memory_columns;

/// What the owner bound at `$param` may see through the memories API: global
/// memories, their own user's and their own workstreams' (`NULL`: every
/// memory, for a service caller).
macro_rules! owned_clause {
    ($param:literal) => {
        concat!(
            "(",
            $param,
            " IS NULL OR scope = 'global' OR (scope = 'user' AND scope_id = ",
            $param,
            ") OR (scope = 'workstream' AND scope_id IN (SELECT ws_id FROM workstreams WHERE user_id = ",
            $param,
            ")))"
        )
    };
}

pub(crate) use owned_clause;

/// Checks a memory before it is saved and returns its type (`None`: keep an
/// existing memory's, `general` for a new one; the older name `project` is
/// `general`) and scope (default `global`).
pub(crate) fn check_memory(
    m: &crate::types::NewMemory,
) -> crate::error::Result<(Option<String>, String)> {
    use crate::error::StorageError;
    let ty = m.memory_type.as_deref().map(|t| match t {
        "project" => "general".to_string(),
        other => other.to_string(),
    });
    let scope = m.scope.clone().unwrap_or_else(|| "global".into());
    if let Some(ty) = &ty
        && !crate::types::MEMORY_TYPES.contains(&ty.as_str())
    {
        return Err(StorageError::InvalidInput(format!(
            "memory type {ty:?} must be one of {:?}",
            crate::types::MEMORY_TYPES
        )));
    }
    if !crate::types::MEMORY_SCOPES.contains(&scope.as_str()) {
        return Err(StorageError::InvalidInput(format!(
            "memory scope {scope:?} must be one of {:?}",
            crate::types::MEMORY_SCOPES
        )));
    }
    if scope != "global" && m.scope_id.is_empty() {
        return Err(StorageError::InvalidInput(format!(
            "a {scope}-scoped memory needs a scope_id"
        )));
    }
    if m.name.is_empty() || m.name.len() > 128 {
        return Err(StorageError::InvalidInput(
            "memory name must be 1-128 bytes".into(),
        ));
    }
    if m.content.len() > crate::types::MAX_CONTENT_BYTES {
        return Err(StorageError::TooLarge {
            field: "content",
            size: m.content.len(),
            limit: crate::types::MAX_CONTENT_BYTES,
        });
    }
    if [&m.name, &m.description, &m.content, &m.scope_id]
        .iter()
        .any(|s| s.contains('\0'))
    {
        return Err(StorageError::InvalidInput(
            "memory fields must not contain NUL".into(),
        ));
    }
    Ok((ty, scope))
}

/// Expands `MemoryStore` for a backend whose store type has a `pool` field.
macro_rules! impl_memory_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn memory_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::Memory> {
                use sqlx::Row;
                Ok($crate::types::Memory {
                    memory_id: r.try_get("memory_id")?,
                    name: r.try_get("name")?,
                    description: r.try_get("description")?,
                    memory_type: r.try_get("type")?,
                    scope: r.try_get("scope")?,
                    scope_id: r.try_get("scope_id")?,
                    content: r.try_get("content")?,
                    created: r.try_get("created")?,
                    updated: r.try_get("updated")?,
                    last_accessed: r.try_get("last_accessed")?,
                    access_count: r.try_get("access_count")?,
                })
            }

            async fn touch_memories(&self, ids: &[String]) -> $crate::error::Result<()> {
                let now = $crate::util::now();
                for id in ids {
                    sqlx::query(
                        "UPDATE structured_memories SET access_count = access_count + 1, last_accessed = $2 WHERE memory_id = $1",
                    )
                    .bind(id)
                    .bind(&now)
                    .execute(&self.pool)
                    .await?;
                }
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::MemoryStore for $store {
            async fn save_memory(
                &self,
                m: &$crate::types::NewMemory,
            ) -> $crate::error::Result<$crate::types::Memory> {
                let (ty, scope) = $crate::ops::memories::check_memory(m)?;
                let now = $crate::util::now();
                let row = sqlx::query(concat!(
                    "INSERT INTO structured_memories (memory_id, name, description, type, scope, scope_id, content, created, updated) \
                     VALUES ($1, $2, $3, COALESCE($4, 'general'), $5, $6, $7, $8, $8) \
                     ON CONFLICT (name, scope, scope_id) DO UPDATE SET description = excluded.description, \
                     type = COALESCE($4, structured_memories.type), content = excluded.content, updated = excluded.updated RETURNING ",
                    $crate::ops::memories::memory_columns!()
                ))
                .bind($crate::util::random_hex(16))
                .bind(&m.name)
                .bind(&m.description)
                .bind(&ty)
                .bind(&scope)
                .bind(&m.scope_id)
                .bind(&m.content)
                .bind(&now)
                .fetch_one(&self.pool)
                .await?;
                Self::memory_from_row(&row)
            }

            async fn get_memory(
                &self,
                name: &str,
                scope: &str,
                scope_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::Memory>> {
                let row = sqlx::query(concat!(
                    "UPDATE structured_memories SET access_count = access_count + 1, last_accessed = $4 \
                     WHERE name = $1 AND scope = $2 AND scope_id = $3 RETURNING ",
                    $crate::ops::memories::memory_columns!()
                ))
                .bind(name)
                .bind(scope)
                .bind(scope_id)
                .bind($crate::util::now())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::memory_from_row).transpose()
            }

            async fn delete_memory(&self, name: &str, scope: &str, scope_id: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "DELETE FROM structured_memories WHERE name = $1 AND scope = $2 AND scope_id = $3",
                )
                .bind(name)
                .bind(scope)
                .bind(scope_id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn list_memories(
                &self,
                owner: Option<&str>,
                memory_type: Option<&str>,
                scope: Option<&str>,
                limit: i64,
            ) -> $crate::error::Result<Vec<$crate::types::Memory>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::memories::memory_columns!(),
                    " FROM structured_memories WHERE ($1 IS NULL OR type = $1) AND ($2 IS NULL OR scope = $2) AND ",
                    $crate::ops::memories::owned_clause!("$4"),
                    " ORDER BY updated DESC, memory_id LIMIT $3"
                ))
                .bind(memory_type)
                .bind(scope)
                .bind(limit.clamp(1, 1000))
                .bind(owner)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::memory_from_row).collect()
            }

            async fn list_visible_memories(
                &self,
                view: &$crate::types::MemoryView,
                scope: Option<&str>,
                memory_type: Option<&str>,
                limit: i64,
            ) -> $crate::error::Result<Vec<$crate::types::Memory>> {
                // The newest of each visible scope (one index range each,
                // read in index order: no tie-break column, or every row of
                // the scope is sorted), then the newest of those.
                macro_rules! newest_of {
                    ($where:literal, $alias:literal) => {
                        concat!(
                            "SELECT * FROM (SELECT ",
                            $crate::ops::memories::memory_columns!(),
                            " FROM structured_memories WHERE ",
                            $where,
                            " AND ($4 IS NULL OR scope = $4) AND ($5 IS NULL OR type = $5) \
                             ORDER BY updated DESC LIMIT $6) AS ",
                            $alias
                        )
                    };
                }
                let rows = sqlx::query(concat!(
                    "SELECT * FROM (",
                    // Global memories have no scope id; saying so lets the
                    // index serve the order.
                    newest_of!("scope = 'global' AND scope_id = ''", "g"),
                    " UNION ALL ",
                    newest_of!("scope = 'user' AND scope_id = $1", "u"),
                    " UNION ALL ",
                    newest_of!("scope = 'workstream' AND scope_id = $2", "w"),
                    " UNION ALL ",
                    newest_of!("scope = 'project' AND scope_id = $3", "p"),
                    ") AS visible ORDER BY updated DESC, memory_id LIMIT $6"
                ))
                .bind(&view.user_id)
                .bind(&view.ws_id)
                .bind(&view.project_id)
                .bind(scope)
                .bind(memory_type)
                .bind(limit.clamp(1, 1000))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::memory_from_row).collect()
            }

            async fn search_visible_memories(
                &self,
                query: &str,
                view: &$crate::types::MemoryView,
                scope: Option<&str>,
                limit: i64,
            ) -> $crate::error::Result<Vec<$crate::types::Memory>> {
                let tokens = $crate::util::search_tokens(query);
                if tokens.is_empty() {
                    return Ok(Vec::new());
                }
                // One index range per visible scope (global, the caller's
                // user, workstream and project), each matched and cut to
                // `limit` on its own, then the newest of those: only rows
                // the caller may see are ever matched.
                let limit = limit.clamp(1, 1000);
                let mut qb = sqlx::QueryBuilder::<$db>::new("SELECT * FROM (");
                let scopes: [(&str, Option<String>); 4] = [
                    ("global", Some(String::new())),
                    ("user", view.user_id.clone()),
                    ("workstream", view.ws_id.clone()),
                    ("project", view.project_id.clone()),
                ];
                let mut first = true;
                for (name, id) in scopes {
                    let Some(id) = id else { continue };
                    if scope.is_some_and(|s| s != name) {
                        continue;
                    }
                    if !first {
                        qb.push(" UNION ALL ");
                    }
                    first = false;
                    qb.push(concat!(
                        "SELECT * FROM (SELECT ",
                        $crate::ops::memories::memory_columns!(),
                        " FROM structured_memories WHERE scope = "
                    ))
                    .push_bind(name)
                    .push(" AND scope_id = ")
                    .push_bind(id)
                    .push(" AND (");
                    // Any word: the caller ranks the candidates (BM25).
                    for (i, t) in tokens.iter().enumerate() {
                        if i > 0 {
                            qb.push(" OR ");
                        }
                        qb.push("lower(name || ' ' || description || ' ' || content) LIKE ")
                            .push_bind(format!("%{}%", $crate::util::like_escape(t)))
                            .push(" ESCAPE '\\'");
                    }
                    qb.push(") ORDER BY updated DESC LIMIT ")
                        .push_bind(limit)
                        .push(") AS s_")
                        .push(name);
                }
                if first {
                    return Ok(Vec::new());
                }
                qb.push(") AS visible ORDER BY updated DESC, memory_id LIMIT ")
                    .push_bind(limit);
                let rows = qb.build().fetch_all(&self.pool).await?;
                rows.iter().map(Self::memory_from_row).collect()
            }

            async fn search_memories(
                &self,
                owner: Option<&str>,
                query: &str,
                limit: i64,
            ) -> $crate::error::Result<Vec<$crate::types::Memory>> {
                let tokens = $crate::util::search_tokens(query);
                if tokens.is_empty() {
                    return Ok(Vec::new());
                }
                let mut qb = sqlx::QueryBuilder::<$db>::new(concat!(
                    "SELECT ",
                    $crate::ops::memories::memory_columns!(),
                    " FROM structured_memories WHERE 1 = 1"
                ));
                if let Some(me) = owner {
                    qb.push(" AND (scope = 'global' OR (scope = 'user' AND scope_id = ")
                        .push_bind(me.to_string())
                        .push(") OR (scope = 'workstream' AND scope_id IN (SELECT ws_id FROM workstreams WHERE user_id = ")
                        .push_bind(me.to_string())
                        .push(")))");
                }
                for t in &tokens {
                    qb.push(" AND lower(name || ' ' || description || ' ' || content) LIKE ")
                        .push_bind(format!("%{}%", $crate::util::like_escape(t)))
                        .push(" ESCAPE '\\'");
                }
                qb.push(" ORDER BY updated DESC, memory_id LIMIT ")
                    .push_bind(limit.clamp(1, 1000));
                let rows = qb.build().fetch_all(&self.pool).await?;
                let found: Vec<$crate::types::Memory> =
                    rows.iter().map(Self::memory_from_row).collect::<$crate::error::Result<_>>()?;
                let ids: Vec<String> = found.iter().map(|m| m.memory_id.clone()).collect();
                self.touch_memories(&ids).await?;
                Ok(found)
            }
        }
    };
}

pub(crate) use impl_memory_store;
