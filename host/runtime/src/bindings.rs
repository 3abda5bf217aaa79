//! Host bindings generated from `wit/`, one module per released WIT version.
//!
//! A new version gets a sibling module (`v0_2_0`) whose unchanged interfaces map
//! onto the older generated code with `with`, so one linker serves old and new
//! guests.

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
