//! `PolicyStore`: admin tool policies (allow / deny / ask per tool glob,
//! optionally per role), listed in the order they are checked.

/// Columns of `tool_policies`.
macro_rules! policy_columns {
    () => {
        "policy_id, name, tool_pattern, action, role, priority, enabled, description, created_by, created, updated"
    };
}

pub(crate) use policy_columns;

/// Checks a policy before it is saved: a name, a glob over tool names, a role
/// name if any.
pub(crate) fn check_policy(p: &crate::types::NewToolPolicy) -> crate::error::Result<()> {
    let bad = |m: String| Err(crate::error::StorageError::InvalidInput(m));
    let name_ok = !p.name.is_empty()
        && p.name.len() <= 64
        && p.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !name_ok {
        return bad(format!(
            "policy name {:?} must be 1-64 letters, digits, '-', '_' or '.'",
            p.name
        ));
    }
    if let Err(e) = crate::types::tool_glob(&p.tool_pattern) {
        return bad(e);
    }
    if let Some(role) = &p.role
        && (role.is_empty()
            || role.len() > 64
            || !role
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)))
    {
        return bad(format!("role {role:?} is not a role name"));
    }
    if !(-1_000_000..=1_000_000).contains(&p.priority) {
        return bad(format!("priority {} is outside ±1000000", p.priority));
    }
    if p.description.len() > 1_000 {
        return bad("a policy description is at most 1000 characters".into());
    }
    Ok(())
}

/// Expands `PolicyStore` for a backend.
macro_rules! impl_policy_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn policy_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::ToolPolicy> {
                use sqlx::Row;
                let action: String = r.try_get("action")?;
                Ok($crate::types::ToolPolicy {
                    policy_id: r.try_get("policy_id")?,
                    name: r.try_get("name")?,
                    tool_pattern: r.try_get("tool_pattern")?,
                    action: $crate::types::PolicyAction::parse(&action).ok_or_else(|| {
                        $crate::error::StorageError::InvalidInput(format!(
                            "stored policy action {action:?}"
                        ))
                    })?,
                    role: r.try_get("role")?,
                    priority: r.try_get("priority")?,
                    enabled: r.try_get("enabled")?,
                    description: r.try_get("description")?,
                    created_by: r.try_get("created_by")?,
                    created: r.try_get("created")?,
                    updated: r.try_get("updated")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::PolicyStore for $store {
            async fn create_policy(
                &self,
                p: &$crate::types::NewToolPolicy,
            ) -> $crate::error::Result<$crate::types::ToolPolicy> {
                $crate::ops::policies::check_policy(p)?;
                let now = $crate::util::now();
                let id = $crate::util::random_hex(16);
                let r = sqlx::query(concat!(
                    "INSERT INTO tool_policies (",
                    $crate::ops::policies::policy_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING ",
                    $crate::ops::policies::policy_columns!()
                ))
                .bind(&id)
                .bind(&p.name)
                .bind(&p.tool_pattern)
                .bind(p.action.as_str())
                .bind(&p.role)
                .bind(p.priority)
                .bind(p.enabled)
                .bind(&p.description)
                .bind(&p.created_by)
                .bind(&now)
                .fetch_one(&self.pool)
                .await
                .map_err(|e| match &e {
                    sqlx::Error::Database(d) if d.is_unique_violation() => {
                        $crate::error::StorageError::PolicyExists(p.name.clone())
                    }
                    _ => $crate::error::StorageError::Database(e),
                })?;
                Self::policy_from_row(&r)
            }

            async fn update_policy(
                &self,
                policy_id: &str,
                p: &$crate::types::NewToolPolicy,
            ) -> $crate::error::Result<Option<$crate::types::ToolPolicy>> {
                $crate::ops::policies::check_policy(p)?;
                let r = sqlx::query(concat!(
                    "UPDATE tool_policies SET name = $2, tool_pattern = $3, action = $4, role = $5, \
                     priority = $6, enabled = $7, description = $8, updated = $9 WHERE policy_id = $1 RETURNING ",
                    $crate::ops::policies::policy_columns!()
                ))
                .bind(policy_id)
                .bind(&p.name)
                .bind(&p.tool_pattern)
                .bind(p.action.as_str())
                .bind(&p.role)
                .bind(p.priority)
                .bind(p.enabled)
                .bind(&p.description)
                .bind($crate::util::now())
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| match &e {
                    sqlx::Error::Database(d) if d.is_unique_violation() => {
                        $crate::error::StorageError::PolicyExists(p.name.clone())
                    }
                    _ => $crate::error::StorageError::Database(e),
                })?;
                r.as_ref().map(Self::policy_from_row).transpose()
            }

            async fn delete_policy(&self, policy_id: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query("DELETE FROM tool_policies WHERE policy_id = $1")
                    .bind(policy_id)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n > 0)
            }

            async fn get_policy(
                &self,
                policy_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::ToolPolicy>> {
                let r = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::policies::policy_columns!(),
                    " FROM tool_policies WHERE policy_id = $1"
                ))
                .bind(policy_id)
                .fetch_optional(&self.pool)
                .await?;
                r.as_ref().map(Self::policy_from_row).transpose()
            }

            async fn list_policies(&self) -> $crate::error::Result<Vec<$crate::types::ToolPolicy>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::policies::policy_columns!(),
                    " FROM tool_policies ORDER BY priority, created, policy_id"
                ))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::policy_from_row).collect()
            }
        }
    };
}

pub(crate) use impl_policy_store;
