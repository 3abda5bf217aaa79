//! `/openapi.json`, generated from the handlers' `#[utoipa::path]` annotations
//! and their request types, and `/docs`, a readable rendering of it served by
//! the UI bundle (no CDN).
//!
//! The document is generated ahead of time into `docs/openapi.json` and the
//! server serves that file: building it at run time took ~1.4 MB of the
//! shipped binary's code (issue 21, target 6). A test fails when the file and
//! the annotations (routes, body types, their doc comments, the crate version)
//! disagree, and rewrites it with `TURNSTONE_BLESS_OPENAPI=1` (then build
//! again: the build script embeds the file).

use super::{
    attachments, auth, channels, governance, info, mcp_servers, memories, notify, plugins,
    previews, skills, sse, work, ws,
};
use crate::http::{ApiError, AppState};
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use turnstone_protocol as protocol;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// Adds the two credentials: bearer (JWT or `ts_` token) and the session cookie.
struct Security;

impl Modify for Security {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A session JWT or an API token (ts_ + 64 hex)"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::new(crate::auth::COOKIE))),
        );
    }
}

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "Turnstone server API", description = "The /v1 API of `turnstone serve` (wire-compatible with the original 1.9.0 server). Events are described in docs/server.md."),
    paths(
        info::health, info::metrics, auth::auth_status, auth::setup,
        auth::login, auth::logout, auth::whoami,
        ws::create, ws::list, ws::detail, ws::send, ws::unsend, ws::approve, ws::cancel, ws::close,
        ws::open, ws::delete_ws, ws::title, ws::rewind, ws::retry, ws::command,
        info::models, skills::list, info::dashboard, info::saved, info::history, info::export,
        work::children, work::watches, work::cancel_watch,
        previews::list, previews::content,
        notify::list, notify::create, notify::delete, notify::ws_list, notify::ws_create, notify::ws_delete,
        memories::list, memories::save, memories::search, memories::get_one, memories::remove,
        memories::get_named_search, memories::remove_named_search,
        sse::workstream_events, sse::global_events,
        attachments::upload, attachments::list, attachments::content, attachments::remove,
        plugins::list, plugins::detail, plugins::enable, plugins::disable, plugins::set_grants,
        plugins::revoke, plugins::set_config, plugins::reload_one, plugins::reload_all, plugins::install,
        plugins::uninstall, plugins::audit,
        mcp_servers::list, mcp_servers::create, mcp_servers::update, mcp_servers::delete,
        governance::list_policies, governance::create_policy, governance::update_policy,
        governance::delete_policy, governance::usage, governance::audit,
        skills::admin_list, skills::create, skills::update, skills::delete, skills::versions,
        channels::webhook, channels::link_code, channels::links, channels::unlink,
    ),
    components(schemas(
        super::ErrorBody, super::RetryBody, crate::error::WireError,
        protocol::Op, protocol::InputPart, protocol::Decision,
        protocol::Event, protocol::WsEvent, protocol::GlobalEvent,
        protocol::Verdict, protocol::OutputWarning, protocol::Annotation, protocol::CapabilityAudit,
        protocol::FileTouch, protocol::HostTouch, protocol::ProcessTouch,
        protocol::SessionState, protocol::ToolItem, protocol::Text, protocol::Message,
        protocol::Reason, protocol::Connected, protocol::StateChange, protocol::UserTurn,
        protocol::MessageQueued, protocol::Status, protocol::Items, protocol::ApproveRequest,
        protocol::ApprovalResolved, protocol::ToolOutputChunk, protocol::ToolResult,
        protocol::WsState, protocol::InProgressSnapshot, protocol::ReplayOk,
        protocol::ReplayTruncated, protocol::Compaction,
        protocol::GlobalWsState, protocol::WorkstreamSnapshot, protocol::Aggregate,
        protocol::NodeSnapshot, protocol::WsCreated, protocol::WsActivity, protocol::WsRename,
        protocol::ApproveDetail, protocol::GlobalApproveRequest, protocol::GlobalApprovalResolved,
        protocol::GlobalWsClosed, protocol::BackendHealth, protocol::DefaultModel,
        protocol::Health, protocol::HealthChanged,
        protocol::AgentOrigin, protocol::AgentEvent, protocol::AgentContext, protocol::SystemTurn,
        protocol::WatchInfo, protocol::WatchChanged, protocol::Preview,
    )),
    modifiers(&Security),
    security(("bearer" = []), ("cookie" = [])),
)]
pub struct ApiDoc;

/// The document generated from [`ApiDoc`], committed as `docs/openapi.json`,
/// minified and gzipped by the build script.
const DOCUMENT_GZ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.min.json.gz"));

/// The embedded document's text.
fn document() -> Result<String, ApiError> {
    crate::web::gunzip(DOCUMENT_GZ)
        .and_then(|bytes| String::from_utf8(bytes).map_err(std::io::Error::other))
        .map_err(|e| ApiError::Internal(format!("embedded docs/openapi.json: {e}")))
}

/// `GET /openapi.json`: the generated description, with this server's
/// model aliases as the values `model` may take on `/new`.
pub async fn openapi_json(State(state): State<AppState>) -> Response {
    let aliases = state.node.as_ref().map(|n| {
        let reg = n.mgr.deps.models.snapshot();
        reg.aliases().map(|a| a.name.clone()).collect::<Vec<_>>()
    });
    match document().and_then(|text| described(&text, aliases)) {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// The document in `text` with `aliases` (when the server has a node) as the
/// values `model` may take on `/new`.
fn described(text: &str, aliases: Option<Vec<String>>) -> Result<serde_json::Value, ApiError> {
    // Parsed per request rather than kept: the tree is several times the
    // 210 KB text, heap an idle server would otherwise hold for good after
    // one visit to /docs.
    let mut v = serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
        ApiError::Internal(format!(
            "docs/openapi.json was not JSON when this server was built ({e}); regenerate it \
             with TURNSTONE_BLESS_OPENAPI=1"
        ))
    })?;
    if let Some(aliases) = aliases {
        let mut values: Vec<serde_json::Value> = aliases.into_iter().map(Into::into).collect();
        // The field is optional and nullable: null picks the default.
        values.push(serde_json::Value::Null);
        if let Some(model) = v
            .pointer_mut("/components/schemas/CreateBody/properties/model")
            .and_then(|m| m.as_object_mut())
        {
            model.insert("enum".into(), values.into());
        }
    }
    Ok(v)
}

/// `GET /docs`: the UI bundle's API reference page (it renders /openapi.json).
pub async fn docs_page(headers: axum::http::HeaderMap) -> Response {
    crate::web::asset("docs.html", &headers)
}

#[cfg(test)]
mod tests {
    use super::{ApiDoc, described, document};
    use crate::http::ApiError;
    use serde_json::json;
    use utoipa::OpenApi;

    /// The embedded document gets the aliases on `model`; a broken one (what
    /// the build script embeds when the file is missing or not JSON) is an
    /// internal error that names the fix, never a half document.
    #[test]
    fn the_served_document_lists_the_aliases_and_a_broken_one_is_an_error() {
        let v = described(
            &document().unwrap(),
            Some(vec!["fast".into(), "big".into()]),
        )
        .unwrap();
        assert_eq!(
            v.pointer("/components/schemas/CreateBody/properties/model/enum"),
            Some(&json!(["fast", "big", null]))
        );
        let plain = described(&document().unwrap(), None).unwrap();
        assert!(
            plain
                .pointer("/components/schemas/CreateBody/properties/model/enum")
                .is_none()
        );
        for broken in ["", "{\"openapi\": "] {
            match described(broken, None) {
                Err(ApiError::Internal(m)) => {
                    assert!(m.contains("TURNSTONE_BLESS_OPENAPI=1"), "{m}")
                }
                other => panic!("{broken:?} gave {other:?}"),
            }
        }
    }

    /// [`ApiDoc`]'s document as served, before a server adds its model aliases.
    fn generated_document() -> serde_json::Result<serde_json::Value> {
        let mut doc = ApiDoc::openapi();
        doc.info.version = env!("CARGO_PKG_VERSION").to_string();
        serde_json::to_value(&doc)
    }

    /// The served file is what the annotations generate: a changed route or
    /// type must regenerate it (`TURNSTONE_BLESS_OPENAPI=1` writes it).
    #[test]
    fn the_committed_document_is_the_generated_one() {
        let generated = generated_document().unwrap();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
        let pretty = serde_json::to_string_pretty(&generated).unwrap() + "\n";
        if std::env::var("TURNSTONE_BLESS_OPENAPI").as_deref() == Ok("1") {
            std::fs::write(path, pretty).unwrap();
            return;
        }
        let hint = "run `TURNSTONE_BLESS_OPENAPI=1 cargo test -p turnstone-server --lib openapi` \
                    and commit docs/openapi.json (a changed route, body type, doc comment on \
                    either, or crate version changes the document)";
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == pretty,
            "docs/openapi.json is not what the annotations generate: {hint}"
        );
        // The copy the build script embedded, in case it missed a change.
        let embedded: Option<serde_json::Value> = serde_json::from_str(&document().unwrap()).ok();
        assert!(
            embedded.as_ref() == Some(&generated),
            "the embedded document is stale: build again ({hint})"
        );
    }

    /// The paths registered with `.route(` in a router's source, in order.
    fn routed_paths(source: &str) -> Vec<String> {
        source
            .split(".route(")
            .skip(1)
            .filter_map(|rest| {
                let rest = rest.trim_start();
                let body = rest.strip_prefix('"')?;
                Some(body[..body.find('"')?].to_string())
            })
            .collect()
    }

    /// Every route the server serves is in `/openapi.json`, so the
    /// schemathesis run (which walks the document) reaches every one; a new
    /// route without `#[utoipa::path]` fails here.
    #[test]
    fn every_route_is_in_the_openapi_document() {
        let doc = ApiDoc::openapi();
        let documented = |p: &str| doc.paths.paths.contains_key(p);
        // Outside /v1: the description itself and its rendering are not API.
        let undocumented_by_design = ["/openapi.json", "/docs"];
        let mut checked = 0;
        for path in routed_paths(include_str!("mod.rs"))
            .into_iter()
            .chain(routed_paths(include_str!("auth.rs")))
        {
            if undocumented_by_design.contains(&path.as_str()) {
                continue;
            }
            let full = if ["/health", "/metrics"].contains(&path.as_str()) {
                path.clone()
            } else {
                format!("/v1{path}")
            };
            assert!(documented(&full), "{full} is routed but not documented");
            checked += 1;
        }
        assert!(checked > 60, "the route scan found only {checked} routes");
    }
}
