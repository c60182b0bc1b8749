//! The sentinel client: the data nodes get the sentinel URLs' credentials; the sentinels get
//! their own ([`Config::with_sentinel_auth`](crate::Config::with_sentinel_auth)) or, without
//! them, as Redisson does, the URL's only when they ask for a password.

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionInfo, RedisConnectionInfo};

use super::{Endpoints, Nodes};
use crate::error::{is_auth_error, LockError, Result};

/// What the sentinels get: `(username, password)`, or nothing.
type Credentials = Option<(Option<String>, String)>;

impl Endpoints {
    /// A sentinel client for the configured sentinels and master. Without
    /// `with_sentinel_auth`, and with a password in the URL, one sentinel is asked (a `PING`
    /// without credentials) whether it wants one.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] outside sentinel mode; redis-rs' errors for a builder it
    /// refuses.
    pub async fn sentinel_client(&self) -> Result<SentinelClient> {
        Ok(self.sentinel_parts().await?.0)
    }

    /// [`sentinel_client`](Self::sentinel_client) and one plain client per sentinel, with the
    /// sentinels' own credentials and TLS: what failover awareness subscribes with
    /// (`+switch-master` on the sentinels' pub/sub, `conn/sentinel.rs`).
    pub(crate) async fn sentinel_parts(&self) -> Result<(SentinelClient, Vec<redis::Client>)> {
        let Nodes::Sentinel { sentinels, master } = &self.nodes else {
            return Err(LockError::InvalidArgument(
                "a sentinel client needs a sentinel configuration",
            ));
        };
        let Some(first) = sentinels.first() else {
            return Err(LockError::InvalidArgument(
                "sentinel mode needs at least one sentinel",
            ));
        };
        let data = first.redis_settings().clone();
        let to_sentinels: Credentials = match (&self.sentinel_auth, data.password()) {
            (Some(auth), _) => Some((auth.username.clone(), auth.password.clone())),
            (None, None) => None,
            (None, Some(password)) => self
                .sentinels_want_auth(sentinels)
                .await
                .then(|| (data.username().map(str::to_owned), password.to_owned())),
        };
        let mut watchers = Vec::with_capacity(sentinels.len());
        for info in sentinels {
            let mut settings = RedisConnectionInfo::default();
            if let Some((user, password)) = &to_sentinels {
                if let Some(user) = user {
                    settings = settings.set_username(user);
                }
                settings = settings.set_password(password);
            }
            watchers.push(self.client_at(info.clone().set_redis_settings(settings))?);
        }
        let mut builder = SentinelClientBuilder::new(
            sentinels.iter().map(|i| i.addr().clone()),
            master,
            SentinelServerType::Master,
        )?
        .set_client_to_redis_db(data.db());
        if let Some(user) = data.username() {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = data.password() {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some((user, password)) = to_sentinels {
            if let Some(user) = user {
                builder = builder.set_client_to_sentinel_username(user);
            }
            builder = builder.set_client_to_sentinel_password(password);
        }
        #[cfg(feature = "tls")]
        if self.secure {
            crate::tls::provider::ensure_installed();
            let mode = if self.tls.is_insecure() {
                redis::TlsMode::Insecure
            } else {
                redis::TlsMode::Secure
            };
            builder = builder
                .set_client_to_redis_tls_mode(mode)
                .set_client_to_sentinel_tls_mode(mode);
            if let Some(certs) = &self.certs {
                builder = builder
                    .set_client_to_redis_certificates(certs.for_redis())
                    .set_client_to_sentinel_certificates(certs.for_redis());
            }
        }
        Ok((builder.build()?, watchers))
    }

    /// Whether the first sentinel that answers wants a password (`NOAUTH` to a `PING` sent
    /// without one). When none answers, `true`: the URL's credentials are sent, as before this
    /// question existed, and the connect that follows reports the unreachable sentinels.
    async fn sentinels_want_auth(&self, sentinels: &[ConnectionInfo]) -> bool {
        for info in sentinels {
            let bare = info
                .clone()
                .set_redis_settings(RedisConnectionInfo::default());
            let Ok(client) = self.client_at(bare) else {
                continue;
            };
            let connect = client.get_multiplexed_async_connection();
            let Ok(Ok(mut conn)) = tokio::time::timeout(self.connection_timeout, connect).await
            else {
                continue;
            };
            let ping = redis::cmd("PING");
            let ping = ping.query_async::<redis::Value>(&mut conn);
            match tokio::time::timeout(self.connection_timeout, ping).await {
                Ok(Ok(_)) => return false,
                Ok(Err(e)) if is_auth_error(&e) => return true,
                _ => continue,
            }
        }
        true
    }
}
