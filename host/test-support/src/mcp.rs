//! Real MCP peers, installed by `cargo xtask test` (never faked): npm
//! `@modelcontextprotocol/server-everything` and a fixture server written
//! with the PyPI `mcp` SDK (`tests/mcp/fixture_server.py`).

use std::path::PathBuf;

fn must_exist(p: PathBuf, what: &str) -> PathBuf {
    assert!(
        p.exists(),
        "{what} is missing at {}: run `cargo xtask test` once (it installs the MCP test peers)",
        p.display()
    );
    p
}

/// `node_modules/@modelcontextprotocol/server-everything/dist/index.js`.
pub fn everything_server() -> PathBuf {
    must_exist(
        crate::root()
            .join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "the npm MCP reference server",
    )
}

/// The venv's Python with the `mcp` package.
pub fn python() -> PathBuf {
    must_exist(
        crate::target().join("mcp-venv/bin/python"),
        "the MCP Python venv",
    )
}

/// `tests/mcp/fixture_server.py`.
pub fn fixture_server() -> PathBuf {
    must_exist(
        crate::root().join("tests/mcp/fixture_server.py"),
        "the MCP fixture server",
    )
}

/// `node` on PATH.
pub fn node() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("node"))
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}
