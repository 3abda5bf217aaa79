//! `/openapi.json`, generated from the handlers' `#[utoipa::path]` annotations
//! and their request types, and `/docs`, a readable rendering of it served by
//! the UI bundle (no CDN).

use super::{attachments, info, memories, plugins, sse, ws};
use axum::Json;
use axum::response::{IntoResponse, Response};
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
        crate::http::health, crate::http::metrics, crate::http::auth_status, crate::http::setup,
        crate::http::login, crate::http::logout, crate::http::whoami,
        ws::create, ws::list, ws::detail, ws::send, ws::unsend, ws::approve, ws::cancel, ws::close,
        ws::open, ws::delete_ws, ws::title, ws::rewind, ws::retry, ws::command,
        info::models, info::skills, info::dashboard, info::saved, info::history, info::export,
        memories::list, memories::save, memories::search, memories::get_one, memories::remove,
        sse::workstream_events, sse::global_events,
        attachments::upload, attachments::list, attachments::content, attachments::remove,
        plugins::list, plugins::detail, plugins::enable, plugins::disable, plugins::set_grants,
        plugins::revoke, plugins::set_config, plugins::reload_one, plugins::reload_all, plugins::install,
        plugins::uninstall, plugins::audit,
    ),
    components(schemas(super::ErrorBody)),
    modifiers(&Security),
    security(("bearer" = []), ("cookie" = [])),
)]
pub struct ApiDoc;

/// `GET /openapi.json`.
pub async fn openapi_json() -> Response {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    Json(doc).into_response()
}

/// `GET /docs`: the UI bundle's API reference page (it renders /openapi.json).
pub async fn docs_page() -> Response {
    crate::web::asset("docs.html")
}
