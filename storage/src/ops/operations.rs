//! `OpsStore`: operational records — the audit log, model usage events and the
//! service registry (heartbeats) — written once and expanded for each backend
//! (see the `ops` module docs). These rows are decoded as tuples, so there are
//! no column-list macros or row helpers here.

/// Expands `OpsStore` for a backend whose store type has a `pool` field. `$db`
/// is unused but kept so every domain macro has the same signature.
macro_rules! impl_ops_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::backend::OpsStore for $store {
            async fn append_audit(&self, e: &$crate::types::AuditEntry) -> $crate::error::Result<i64> {
                let id = sqlx::query_scalar(
                    "INSERT INTO audit_log (timestamp, user_id, action, target, detail, ip) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                )
                .bind($crate::util::now())
                .bind(&e.user_id)
                .bind(&e.action)
                .bind(&e.target)
                .bind(&e.detail)
                .bind(&e.ip)
                .fetch_one(&self.pool)
                .await?;
                Ok(id)
            }

            async fn list_audit(&self, limit: i64) -> $crate::error::Result<Vec<$crate::types::AuditEntry>> {
                let rows: Vec<(i64, String, Option<String>, String, Option<String>, Option<String>, Option<String>)> =
                    sqlx::query_as(
                        "SELECT id, timestamp, user_id, action, target, detail, ip FROM audit_log ORDER BY id DESC LIMIT $1",
                    )
                    .bind(limit.clamp(1, 10_000))
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, timestamp, user_id, action, target, detail, ip)| $crate::types::AuditEntry {
                        id,
                        timestamp,
                        user_id,
                        action,
                        target,
                        detail,
                        ip,
                    })
                    .collect())
            }

            async fn record_usage(&self, u: &$crate::types::UsageEvent) -> $crate::error::Result<()> {
                sqlx::query(
                    "INSERT INTO usage_events (timestamp, user_id, ws_id, model, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, tool_calls) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind($crate::util::now())
                .bind(&u.user_id)
                .bind(&u.ws_id)
                .bind(&u.model)
                .bind(u.prompt_tokens)
                .bind(u.completion_tokens)
                .bind(u.cached_tokens)
                .bind(u.reasoning_tokens)
                .bind(u.tool_calls)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn heartbeat(&self, s: &$crate::types::ServiceRecord) -> $crate::error::Result<()> {
                let now = $crate::util::now();
                sqlx::query(
                    "INSERT INTO services (service_id, kind, node_id, url, version, started, last_heartbeat) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (service_id) DO UPDATE SET \
                     kind = excluded.kind, node_id = excluded.node_id, url = excluded.url, version = excluded.version, \
                     last_heartbeat = excluded.last_heartbeat",
                )
                .bind(&s.service_id)
                .bind(&s.kind)
                .bind(&s.node_id)
                .bind(&s.url)
                .bind(&s.version)
                .bind(&now)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn live_services(
                &self,
                within: std::time::Duration,
            ) -> $crate::error::Result<Vec<$crate::types::ServiceRecord>> {
                let rows: Vec<(String, String, String, Option<String>, Option<String>, String, String)> = sqlx::query_as(
                    "SELECT service_id, kind, node_id, url, version, started, last_heartbeat FROM services \
                     WHERE last_heartbeat > $1 ORDER BY service_id",
                )
                .bind($crate::util::ago(within))
                .fetch_all(&self.pool)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(service_id, kind, node_id, url, version, started, last_heartbeat)| {
                        $crate::types::ServiceRecord { service_id, kind, node_id, url, version, started, last_heartbeat }
                    })
                    .collect())
            }
        }
    };
}

pub(crate) use impl_ops_store;
