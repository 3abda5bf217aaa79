//! Built-in `web_fetch` and `web_search`.
//!
//! `web_fetch` follows redirects itself so that **every hop** is a separate
//! request through the host, whose SSRF guard resolves and screens each one;
//! the page is reduced to readable text and the session's model answers the
//! user's question about it. `web_search` queries a SearxNG instance.

pub mod fetch;
pub mod search;

turnstone_plugin_sdk::register_tools!(fetch::WebFetch, search::WebSearch);
