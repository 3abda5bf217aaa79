//! Host bindings generated from `wit/`, one module per WIT version.
//!
//! A newer version imports the older version's unchanged interfaces in WIT
//! itself (`wit/v0.2.0/deps/v0.1.0`), and its bindings map them onto the
//! older generated code with `with`: one implementation of each interface,
//! one linker for old and new guests. Only the interfaces that changed get
//! new Rust types; [`crate::adapt`] converts between the versions.

/// `turnstone:plugin@0.1.0`.
pub mod v0_1_0 {
    /// Host-side imports shared by all worlds.
    pub mod host {
        wasmtime::component::bindgen!({
            world: "host-api",
            path: "../../wit/v0.1.0",
            imports: { default: async | trappable },
            with: {
                "turnstone:plugin/process.child": crate::host::process::ChildProcess,
            },
        });
    }

    /// The tool world.
    pub mod tool {
        wasmtime::component::bindgen!({
            world: "tool-plugin",
            path: "../../wit/v0.1.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "turnstone:plugin/types": super::host::turnstone::plugin::types,
                "turnstone:plugin/log": super::host::turnstone::plugin::log,
                "turnstone:plugin/config": super::host::turnstone::plugin::config,
                "turnstone:plugin/process": super::host::turnstone::plugin::process,
                "turnstone:plugin/kv": super::host::turnstone::plugin::kv,
                "turnstone:plugin/clock": super::host::turnstone::plugin::clock,
            },
        });
    }

    /// The provider world.
    pub mod provider {
        wasmtime::component::bindgen!({
            world: "provider-plugin",
            path: "../../wit/v0.1.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "turnstone:plugin/types": super::host::turnstone::plugin::types,
                "turnstone:plugin/log": super::host::turnstone::plugin::log,
                "turnstone:plugin/config": super::host::turnstone::plugin::config,
                "turnstone:plugin/process": super::host::turnstone::plugin::process,
                "turnstone:plugin/kv": super::host::turnstone::plugin::kv,
                "turnstone:plugin/clock": super::host::turnstone::plugin::clock,
            },
        });
    }

    /// The channel world.
    pub mod channel {
        wasmtime::component::bindgen!({
            world: "channel-plugin",
            path: "../../wit/v0.1.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "turnstone:plugin/types": super::host::turnstone::plugin::types,
                "turnstone:plugin/log": super::host::turnstone::plugin::log,
                "turnstone:plugin/config": super::host::turnstone::plugin::config,
                "turnstone:plugin/process": super::host::turnstone::plugin::process,
                "turnstone:plugin/kv": super::host::turnstone::plugin::kv,
                "turnstone:plugin/clock": super::host::turnstone::plugin::clock,
            },
        });
    }
}

/// `turnstone:plugin@0.2.0`: what it adds to 0.1.0 (the tool world exports
/// 0.1.0's `tool`, so tool components of both versions share
/// [`v0_1_0::tool`]; providers get a new `provider` export).
pub mod v0_2_0 {
    /// Host imports new in 0.2.0 (`session-info`, `memory`, `history`,
    /// `skills`, `agents`, `watches`, `notify-targets`, `preview`); 0.1.0's
    /// are [`super::v0_1_0::host`].
    pub mod host {
        wasmtime::component::bindgen!({
            world: "host-api",
            path: "../../wit/v0.2.0",
            imports: { default: async | trappable },
            with: {
                "turnstone:plugin/types@0.1.0": super::super::v0_1_0::host::turnstone::plugin::types,
                "turnstone:plugin/log@0.1.0": super::super::v0_1_0::host::turnstone::plugin::log,
                "turnstone:plugin/config@0.1.0": super::super::v0_1_0::host::turnstone::plugin::config,
                "turnstone:plugin/process@0.1.0": super::super::v0_1_0::host::turnstone::plugin::process,
                "turnstone:plugin/kv@0.1.0": super::super::v0_1_0::host::turnstone::plugin::kv,
                "turnstone:plugin/clock@0.1.0": super::super::v0_1_0::host::turnstone::plugin::clock,
            },
        });
    }

    /// The provider world: `provider@0.2.0` over `provider-types@0.2.0`.
    pub mod provider {
        wasmtime::component::bindgen!({
            world: "provider-plugin",
            path: "../../wit/v0.2.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "turnstone:plugin/types@0.1.0": super::super::v0_1_0::host::turnstone::plugin::types,
                "turnstone:plugin/log@0.1.0": super::super::v0_1_0::host::turnstone::plugin::log,
                "turnstone:plugin/config@0.1.0": super::super::v0_1_0::host::turnstone::plugin::config,
                "turnstone:plugin/process@0.1.0": super::super::v0_1_0::host::turnstone::plugin::process,
                "turnstone:plugin/kv@0.1.0": super::super::v0_1_0::host::turnstone::plugin::kv,
                "turnstone:plugin/clock@0.1.0": super::super::v0_1_0::host::turnstone::plugin::clock,
                "turnstone:plugin/provider-types@0.1.0": super::super::v0_1_0::provider::turnstone::plugin::provider_types,
                "turnstone:plugin/provider-events@0.1.0": super::super::v0_1_0::provider::turnstone::plugin::provider_events,
                "turnstone:plugin/session-info@0.2.0": super::host::turnstone::plugin0_2_0::session_info,
                "turnstone:plugin/memory@0.2.0": super::host::turnstone::plugin0_2_0::memory,
                "turnstone:plugin/history@0.2.0": super::host::turnstone::plugin0_2_0::history,
                "turnstone:plugin/skills@0.2.0": super::host::turnstone::plugin0_2_0::skills,
                "turnstone:plugin/agents@0.2.0": super::host::turnstone::plugin0_2_0::agents,
                "turnstone:plugin/watches@0.2.0": super::host::turnstone::plugin0_2_0::watches,
                "turnstone:plugin/notify-targets@0.2.0": super::host::turnstone::plugin0_2_0::notify_targets,
                "turnstone:plugin/preview@0.2.0": super::host::turnstone::plugin0_2_0::preview,
            },
        });
    }

    /// The guard world: exports `guard@0.2.0`, imports the host API and
    /// `model` (0.1.0's, shared with the tool world).
    pub mod guard {
        wasmtime::component::bindgen!({
            world: "guard-plugin",
            path: "../../wit/v0.2.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "turnstone:plugin/types@0.1.0": super::super::v0_1_0::host::turnstone::plugin::types,
                "turnstone:plugin/log@0.1.0": super::super::v0_1_0::host::turnstone::plugin::log,
                "turnstone:plugin/config@0.1.0": super::super::v0_1_0::host::turnstone::plugin::config,
                "turnstone:plugin/process@0.1.0": super::super::v0_1_0::host::turnstone::plugin::process,
                "turnstone:plugin/kv@0.1.0": super::super::v0_1_0::host::turnstone::plugin::kv,
                "turnstone:plugin/clock@0.1.0": super::super::v0_1_0::host::turnstone::plugin::clock,
                "turnstone:plugin/model@0.1.0": super::super::v0_1_0::tool::turnstone::plugin::model,
                "turnstone:plugin/session-info@0.2.0": super::host::turnstone::plugin0_2_0::session_info,
                "turnstone:plugin/memory@0.2.0": super::host::turnstone::plugin0_2_0::memory,
                "turnstone:plugin/history@0.2.0": super::host::turnstone::plugin0_2_0::history,
                "turnstone:plugin/skills@0.2.0": super::host::turnstone::plugin0_2_0::skills,
                "turnstone:plugin/agents@0.2.0": super::host::turnstone::plugin0_2_0::agents,
                "turnstone:plugin/watches@0.2.0": super::host::turnstone::plugin0_2_0::watches,
                "turnstone:plugin/notify-targets@0.2.0": super::host::turnstone::plugin0_2_0::notify_targets,
                "turnstone:plugin/preview@0.2.0": super::host::turnstone::plugin0_2_0::preview,
            },
        });
    }

    /// The channel world: `channel@0.2.0` with the `websocket` and
    /// `channel-host` imports.
    pub mod channel {
        wasmtime::component::bindgen!({
            world: "channel-plugin",
            path: "../../wit/v0.2.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "turnstone:plugin/types@0.1.0": super::super::v0_1_0::host::turnstone::plugin::types,
                "turnstone:plugin/log@0.1.0": super::super::v0_1_0::host::turnstone::plugin::log,
                "turnstone:plugin/config@0.1.0": super::super::v0_1_0::host::turnstone::plugin::config,
                "turnstone:plugin/process@0.1.0": super::super::v0_1_0::host::turnstone::plugin::process,
                "turnstone:plugin/kv@0.1.0": super::super::v0_1_0::host::turnstone::plugin::kv,
                "turnstone:plugin/clock@0.1.0": super::super::v0_1_0::host::turnstone::plugin::clock,
                "turnstone:plugin/session-info@0.2.0": super::host::turnstone::plugin0_2_0::session_info,
                "turnstone:plugin/memory@0.2.0": super::host::turnstone::plugin0_2_0::memory,
                "turnstone:plugin/history@0.2.0": super::host::turnstone::plugin0_2_0::history,
                "turnstone:plugin/skills@0.2.0": super::host::turnstone::plugin0_2_0::skills,
                "turnstone:plugin/agents@0.2.0": super::host::turnstone::plugin0_2_0::agents,
                "turnstone:plugin/watches@0.2.0": super::host::turnstone::plugin0_2_0::watches,
                "turnstone:plugin/notify-targets@0.2.0": super::host::turnstone::plugin0_2_0::notify_targets,
                "turnstone:plugin/preview@0.2.0": super::host::turnstone::plugin0_2_0::preview,
                "turnstone:plugin/websocket.connection": crate::host::websocket::WsConnection,
            },
        });
    }
}
