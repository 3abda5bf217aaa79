//! `OpsStore`: operational records — the audit log, model usage events and the
//! service registry (heartbeats) — written once and expanded for each backend
//! (see the `ops` module docs). These rows are decoded as tuples, so there are
//! no column-list macros or row helpers here.

/// Expands `OpsStore` for a backend whose store type has a `pool` field and a
/// `record_usage_row` method (SQLite queues usage rows for its group commit,
/// PostgreSQL writes each at once); `$db` is the backend's database, for the
/// shared usage statement.
macro_rules! impl_ops_store {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Inserts `rows` into `usage_events` in one statement (a batch
            /// when a group commit writes several), stamped now.
            pub(crate) async fn insert_usage_rows(
                conn: &mut <$db as sqlx::Database>::Connection,
                rows: &[&$crate::types::UsageEvent],
            ) -> std::result::Result<(), sqlx::Error> {
                let now = $crate::util::now();
                for chunk in rows.chunks(500) {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO usage_events (timestamp, user_id, ws_id, model, prompt_tokens, completion_tokens, cached_tokens, \
                         reasoning_tokens, tool_calls, model_alias, cache_creation_tokens, latency_ms, purpose) ",
                    );
                    qb.push_values(chunk, |mut b, u| {
                        b.push_bind(now.clone())
                            .push_bind(u.user_id.clone())
                            .push_bind(u.ws_id.clone())
                            .push_bind(u.model.clone())
                            .push_bind(u.prompt_tokens)
                            .push_bind(u.completion_tokens)
                            .push_bind(u.cached_tokens)
                            .push_bind(u.reasoning_tokens)
                            .push_bind(u.tool_calls)
                            .push_bind(u.model_alias.clone())
                            .push_bind(u.cache_creation_tokens)
                            .push_bind(u.latency_ms)
                            .push_bind(if u.purpose.is_empty() { "turn".to_string() } else { u.purpose.clone() });
                    });
                    // Only the one-row statement is worth a place in the
                    // connection's statement cache (each row count is a
                    // statement of its own).
                    qb.build().persistent(chunk.len() == 1).execute(&mut *conn).await?;
                }
                Ok(())
            }
        }

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

            async fn query_audit(
                &self,
                q: &$crate::types::AuditQuery,
            ) -> $crate::error::Result<Vec<$crate::types::AuditEntry>> {
                let (sql, binds) = $crate::ops::operations::audit_sql(q);
                let mut query = sqlx::query_as::<_, (i64, String, Option<String>, String, Option<String>, Option<String>, Option<String>)>(sqlx::AssertSqlSafe(sql));
                for b in binds {
                    query = match b {
                        $crate::ops::operations::Bind::Text(t) => query.bind(t),
                        $crate::ops::operations::Bind::Int(i) => query.bind(i),
                    };
                }
                let rows = query.fetch_all(&self.pool).await?;
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
                self.record_usage_row(u).await
            }

            async fn usage_summary(
                &self,
                q: &$crate::types::UsageQuery,
            ) -> $crate::error::Result<Vec<$crate::types::UsageRow>> {
                let (sql, binds) = $crate::ops::operations::usage_sql(q);
                let mut query = sqlx::query_as::<_, (Option<String>, Option<String>, Option<String>, i64, i64, i64, i64, i64, i64, i64, i64)>(sqlx::AssertSqlSafe(sql));
                for b in binds {
                    query = match b {
                        $crate::ops::operations::Bind::Text(t) => query.bind(t),
                        $crate::ops::operations::Bind::Int(i) => query.bind(i),
                    };
                }
                let rows = query.fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|(user_id, model, day, calls, prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens, reasoning_tokens, tool_calls, avg_latency_ms)| {
                        $crate::types::UsageRow {
                            user_id,
                            model,
                            day,
                            calls,
                            prompt_tokens,
                            completion_tokens,
                            cached_tokens,
                            cache_creation_tokens,
                            reasoning_tokens,
                            tool_calls,
                            avg_latency_ms,
                        }
                    })
                    .collect())
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

/// A value bound to a built query. The queries below are built from this
/// file's own column expressions; every caller-supplied value is bound.
pub(crate) enum Bind {
    Text(String),
    Int(i64),
}

/// A date or time bound in the stored form (`YYYY-MM-DDTHH:MM:SS.mmmZ`,
/// missing parts zero), so text comparison orders it like the stored
/// timestamps: `2026-12-03 10:00` and `2026-12-03T10:00:00Z` both become
/// `2026-12-03T10:00:00.000Z`. Text that is not a date is compared as given.
pub(crate) fn time_bound(s: &str) -> String {
    let b = s.trim().as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .filter(|d| d.iter().all(u8::is_ascii_digit))
            .map(|d| String::from_utf8_lossy(d).into_owned())
    };
    let (Some(y), Some(mo), Some(d)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return s.to_string();
    };
    let hh = digits(11..13).unwrap_or_else(|| "00".into());
    let mm = digits(14..16).unwrap_or_else(|| "00".into());
    let ss = digits(17..19).unwrap_or_else(|| "00".into());
    let frac: String = b
        .get(20..)
        .filter(|_| b.get(19) == Some(&b'.'))
        .map(|f| {
            f.iter()
                .take_while(|c| c.is_ascii_digit())
                .take(3)
                .map(|&c| c as char)
                .collect()
        })
        .unwrap_or_default();
    format!("{y}-{mo}-{d}T{hh}:{mm}:{ss}.{frac:0<3}Z")
}

/// `WHERE` clauses and their binds, numbered from `$1`.
#[derive(Default)]
struct Filter {
    clauses: Vec<String>,
    binds: Vec<Bind>,
}

impl Filter {
    fn push(&mut self, clause: impl Fn(usize) -> String, bind: Bind) {
        self.binds.push(bind);
        self.clauses.push(clause(self.binds.len()));
    }

    fn sql(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }
}

/// The audit listing for `q`: newest first, filtered, paged by id.
pub(crate) fn audit_sql(q: &crate::types::AuditQuery) -> (String, Vec<Bind>) {
    let mut f = Filter::default();
    if let Some(before) = q.before_id {
        f.push(|n| format!("id < ${n}"), Bind::Int(before));
    }
    if let Some(action) = q.action.as_deref().filter(|a| !a.is_empty()) {
        match action.strip_suffix('*') {
            Some(prefix) => f.push(
                |n| format!("substr(action, 1, {}) = ${n}", prefix.chars().count()),
                Bind::Text(prefix.to_string()),
            ),
            None if action.ends_with('.') => f.push(
                |n| format!("substr(action, 1, {}) = ${n}", action.chars().count()),
                Bind::Text(action.to_string()),
            ),
            None => f.push(|n| format!("action = ${n}"), Bind::Text(action.to_string())),
        }
    }
    if let Some(u) = &q.user_id {
        f.push(|n| format!("user_id = ${n}"), Bind::Text(u.clone()));
    }
    if let Some(t) = &q.target {
        f.push(|n| format!("target = ${n}"), Bind::Text(t.clone()));
    }
    if let Some(s) = &q.since {
        f.push(|n| format!("timestamp >= ${n}"), Bind::Text(time_bound(s)));
    }
    if let Some(u) = &q.until {
        f.push(|n| format!("timestamp < ${n}"), Bind::Text(time_bound(u)));
    }
    let limit = q.limit.clamp(1, 1000);
    f.binds.push(Bind::Int(limit));
    let sql = format!(
        "SELECT id, timestamp, user_id, action, target, detail, ip FROM audit_log{} ORDER BY id DESC LIMIT ${}",
        f.sql(),
        f.binds.len()
    );
    (sql, f.binds)
}

/// Usage summed per group of `q.group_by` (one row without grouping). The
/// mean latency is integer division on both backends (PostgreSQL would
/// round a numeric mean; SQLite truncates).
pub(crate) fn usage_sql(q: &crate::types::UsageQuery) -> (String, Vec<Bind>) {
    use crate::types::UsageGroup;
    let mut f = Filter::default();
    if let Some(s) = &q.since {
        f.push(|n| format!("timestamp >= ${n}"), Bind::Text(time_bound(s)));
    }
    if let Some(u) = &q.until {
        f.push(|n| format!("timestamp < ${n}"), Bind::Text(time_bound(u)));
    }
    if let Some(u) = &q.user_id {
        f.push(|n| format!("user_id = ${n}"), Bind::Text(u.clone()));
    }
    if let Some(m) = &q.model_alias {
        f.push(|n| format!("model_alias = ${n}"), Bind::Text(m.clone()));
    }
    let has = |g| q.group_by.contains(&g);
    let col = |g, expr: &str| {
        if has(g) {
            expr.to_string()
        } else {
            "CAST(NULL AS TEXT)".to_string()
        }
    };
    let keys: Vec<&str> = q
        .group_by
        .iter()
        .map(|g| match g {
            UsageGroup::User => "user_id",
            UsageGroup::Model => "model_alias",
            UsageGroup::Day => "substr(timestamp, 1, 10)",
        })
        .collect();
    let mut keys_dedup: Vec<&str> = Vec::new();
    for k in keys {
        if !keys_dedup.contains(&k) {
            keys_dedup.push(k);
        }
    }
    let group = if keys_dedup.is_empty() {
        String::new()
    } else {
        format!(" GROUP BY {}", keys_dedup.join(", "))
    };
    let order = if keys_dedup.is_empty() {
        String::new()
    } else {
        format!(" ORDER BY {}", keys_dedup.join(", "))
    };
    let sum = |c: &str| format!("CAST(COALESCE(SUM({c}), 0) AS BIGINT)");
    let sql = format!(
        "SELECT {}, {}, {}, CAST(COUNT(*) AS BIGINT), {}, {}, {}, {}, {}, {}, COALESCE(CAST(COALESCE(SUM(latency_ms), 0) AS BIGINT) / NULLIF(CAST(COUNT(*) AS BIGINT), 0), 0) FROM usage_events{}{}{}",
        col(UsageGroup::User, "user_id"),
        col(UsageGroup::Model, "model_alias"),
        col(UsageGroup::Day, "substr(timestamp, 1, 10)"),
        sum("prompt_tokens"),
        sum("completion_tokens"),
        sum("cached_tokens"),
        sum("cache_creation_tokens"),
        sum("reasoning_tokens"),
        sum("tool_calls"),
        f.sql(),
        group,
        order,
    );
    (sql, f.binds)
}

#[cfg(test)]
mod tests {
    use super::time_bound;

    #[test]
    fn time_bounds_take_the_stored_form() {
        assert_eq!(time_bound("2026-12-03"), "2026-12-03T00:00:00.000Z");
        assert_eq!(time_bound("2026-12-03 10:00"), "2026-12-03T10:00:00.000Z");
        assert_eq!(
            time_bound("2026-12-03T10:00:00Z"),
            "2026-12-03T10:00:00.000Z"
        );
        assert_eq!(
            time_bound("2026-12-03T10:00:07.5Z"),
            "2026-12-03T10:00:07.500Z"
        );
        assert_eq!(
            time_bound("2026-12-03T10:00:07.123456"),
            "2026-12-03T10:00:07.123Z"
        );
        // A row at 10:00:00.250 is not before 10:00:00.
        assert!("2026-12-03T10:00:00.250Z" >= time_bound("2026-12-03T10:00:00Z").as_str());
        assert_eq!(time_bound("yesterday"), "yesterday");
    }
}
