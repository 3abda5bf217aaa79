//! `ChannelStore`: routes from a chat conversation to its workstream, and
//! one-time link codes (stored hashed; redeeming deletes the row, so a code
//! works once).

macro_rules! impl_channel_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::backend::ChannelStore for $store {
            async fn channel_route(
                &self,
                plugin: &str,
                channel_id: &str,
                thread_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::ChannelRoute>> {
                let row: Option<(String, String, String, String, String, String)> = sqlx::query_as(
                    "SELECT plugin, channel_id, thread_id, ws_id, user_id, created FROM channel_routes \
                     WHERE plugin = $1 AND channel_id = $2 AND thread_id = $3",
                )
                .bind(plugin)
                .bind(channel_id)
                .bind(thread_id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(|(plugin, channel_id, thread_id, ws_id, user_id, created)| {
                    $crate::types::ChannelRoute {
                        plugin,
                        channel_id,
                        thread_id,
                        ws_id,
                        user_id,
                        created,
                    }
                }))
            }

            async fn set_channel_route(
                &self,
                route: &$crate::types::ChannelRoute,
            ) -> $crate::error::Result<()> {
                sqlx::query(
                    "INSERT INTO channel_routes (plugin, channel_id, thread_id, ws_id, user_id, created) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (plugin, channel_id, thread_id) \
                     DO UPDATE SET ws_id = excluded.ws_id, user_id = excluded.user_id, created = excluded.created",
                )
                .bind(&route.plugin)
                .bind(&route.channel_id)
                .bind(&route.thread_id)
                .bind(&route.ws_id)
                .bind(&route.user_id)
                .bind(&route.created)
                .execute(&self.pool)
                .await
                .map_err(|e| $crate::error::classify_user(e, &route.user_id))?;
                Ok(())
            }

            async fn channel_routes_of(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Vec<$crate::types::ChannelRoute>> {
                let rows: Vec<(String, String, String, String, String, String)> = sqlx::query_as(
                    "SELECT plugin, channel_id, thread_id, ws_id, user_id, created FROM channel_routes \
                     WHERE ws_id = $1 ORDER BY created",
                )
                .bind(ws_id)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(plugin, channel_id, thread_id, ws_id, user_id, created)| {
                        $crate::types::ChannelRoute {
                            plugin,
                            channel_id,
                            thread_id,
                            ws_id,
                            user_id,
                            created,
                        }
                    })
                    .collect())
            }

            async fn create_link_code(
                &self,
                code_hash: &str,
                user_id: &str,
                expires: &str,
            ) -> $crate::error::Result<()> {
                // One live code per user: a new one replaces the old.
                sqlx::query("DELETE FROM channel_link_codes WHERE user_id = $1 OR expires < $2")
                    .bind(user_id)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await?;
                sqlx::query(
                    "INSERT INTO channel_link_codes (code_hash, user_id, expires, created) VALUES ($1, $2, $3, $4)",
                )
                .bind(code_hash)
                .bind(user_id)
                .bind(expires)
                .bind($crate::util::now())
                .execute(&self.pool)
                .await
                .map_err(|e| $crate::error::classify_user(e, user_id))?;
                Ok(())
            }

            async fn redeem_link_code(
                &self,
                code_hash: &str,
                now: &str,
            ) -> $crate::error::Result<Option<String>> {
                Ok(sqlx::query_scalar(
                    "DELETE FROM channel_link_codes WHERE code_hash = $1 AND expires >= $2 RETURNING user_id",
                )
                .bind(code_hash)
                .bind(now)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn channel_links(
                &self,
                user_id: &str,
            ) -> $crate::error::Result<Vec<(String, String, String)>> {
                Ok(sqlx::query_as(
                    "SELECT channel_type, channel_user_id, created FROM channel_users WHERE user_id = $1 \
                     ORDER BY channel_type, channel_user_id",
                )
                .bind(user_id)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn unlink_channel_user(
                &self,
                channel_type: &str,
                channel_user_id: &str,
                user_id: &str,
            ) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "DELETE FROM channel_users WHERE channel_type = $1 AND channel_user_id = $2 AND user_id = $3",
                )
                .bind(channel_type)
                .bind(channel_user_id)
                .bind(user_id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }
        }
    };
}

pub(crate) use impl_channel_store;
