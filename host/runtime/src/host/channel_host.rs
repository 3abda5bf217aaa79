//! The `channel-host` import of a running channel adapter: `wait` multiplexes
//! the adapter's WebSocket, the host's command queue, a timer and the stop
//! signal; `complete`, `emit` and `set-state` report back to the
//! [`crate::channel::ChannelLink`]; the verify functions check platform
//! signatures without showing the adapter a secret.

use crate::bindings::v0_1_0::host::turnstone::plugin::types::CapabilityError;
use crate::bindings::v0_2_0::channel::turnstone::plugin0_2_0::channel_host::{self as wit, Wake};
use crate::bindings::v0_2_0::channel::turnstone::plugin0_2_0::channel_types::{
    self, CommandResult, Inbound, LinkState,
};
use crate::bindings::v0_2_0::channel::turnstone::plugin0_2_0::websocket::Message;
use crate::host::websocket::WsConnection;
use crate::state::HostState;
use std::time::Duration;
use wasmtime::component::Resource;

/// Longest single wait (the adapter is woken at least this often).
const MAX_WAIT: Duration = Duration::from_secs(60);

impl channel_types::Host for HostState {}

impl HostState {
    fn run_state(&mut self) -> wasmtime::Result<&mut crate::channel::RunState> {
        self.channel_run
            .as_mut()
            .ok_or_else(|| wasmtime::format_err!("channel-host used outside a channel run"))
    }
}

impl wit::Host for HostState {
    async fn wait(
        &mut self,
        socket: Option<Resource<WsConnection>>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Wake> {
        let (link, stop, slice, base) = {
            let run = self.run_state()?;
            (
                run.link.clone(),
                run.stop.clone(),
                run.slice.clone(),
                run.base,
            )
        };
        slice.park();
        let timeout = Duration::from_millis(timeout_ms.into()).min(MAX_WAIT);
        let wake = {
            let mut rx = link.rx.lock().await;
            let conn = match &socket {
                Some(r) => Some(self.table().get_mut(r)?),
                None => None,
            };
            let socket_msg = async {
                match conn {
                    Some(c) => c.next_message().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => Wake::Stop,
                m = socket_msg => Wake::Socket(m.unwrap_or(Message::Close(None))),
                c = rx.recv() => match c {
                    Some(c) => Wake::Command(c),
                    None => Wake::Stop,
                },
                () = tokio::time::sleep(timeout) => Wake::Timeout,
            }
        };
        if let Wake::Command((id, _)) = &wake {
            self.run_state()?.taken.insert(*id);
        }
        slice.resume(base.elapsed().as_millis() as u64);
        Ok(wake)
    }

    async fn emit(&mut self, event: Inbound) -> wasmtime::Result<()> {
        let link = self.run_state()?.link.clone();
        link.sink().inbound(event);
        Ok(())
    }

    async fn complete(
        &mut self,
        id: u64,
        outcome: Result<CommandResult, String>,
    ) -> wasmtime::Result<()> {
        let run = self.run_state()?;
        // Only a command this instance took can be answered by it.
        if run.taken.remove(&id) {
            run.link.complete(id, outcome);
        }
        Ok(())
    }

    async fn set_state(&mut self, state: LinkState, detail: String) -> wasmtime::Result<()> {
        let link = self.run_state()?.link.clone();
        let detail: String = detail.chars().take(200).collect();
        link.sink().state(state, &detail);
        Ok(())
    }

    async fn verify_hmac_sha256(
        &mut self,
        secret: String,
        message: Vec<u8>,
        signature_hex: String,
    ) -> wasmtime::Result<Result<bool, CapabilityError>> {
        use hmac::Mac;
        if let Err(d) = self.plugin.caps.check_secret(&secret) {
            self.plugin.counters.denial();
            self.audit.denial(d.to_string());
            return Ok(Err(super::denial_to_wit(&d)));
        }
        let value = self
            .call_secrets()
            .and_then(|s| s.secret(&secret))
            .or_else(|| self.plugin.secrets.secret(&secret));
        let Some(value) = value else {
            return Ok(Err(CapabilityError {
                capability: "secret".into(),
                detail: format!("secret {secret} is granted but not set on the host"),
                grant_hint: format!("set {secret} on the host"),
            }));
        };
        self.audit.secret(&secret);
        let Ok(signature) = hex::decode(signature_hex.trim()) else {
            return Ok(Ok(false));
        };
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(value.as_bytes()) else {
            return Ok(Ok(false));
        };
        mac.update(&message);
        // Constant-time comparison.
        Ok(Ok(mac.verify_slice(&signature).is_ok()))
    }

    async fn verify_ed25519(
        &mut self,
        public_key_hex: String,
        message: Vec<u8>,
        signature_hex: String,
    ) -> wasmtime::Result<bool> {
        Ok(verify_ed25519(&public_key_hex, &message, &signature_hex))
    }
}

/// Checks an Ed25519 signature given as hex against a hex public key.
pub(crate) fn verify_ed25519(public_key_hex: &str, message: &[u8], signature_hex: &str) -> bool {
    let Ok(key) = hex::decode(public_key_hex.trim()) else {
        return false;
    };
    let Ok(key) = <[u8; 32]>::try_from(key.as_slice()) else {
        return false;
    };
    let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&key) else {
        return false;
    };
    let Ok(sig) = hex::decode(signature_hex.trim()) else {
        return false;
    };
    let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig) else {
        return false;
    };
    key.verify_strict(message, &sig).is_ok()
}
