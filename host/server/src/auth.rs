//! Who may do what: scopes (`read` < `write` < `approve` < `service`), RBAC
//! roles with permissions, the scope each route needs (the original server's
//! `required_scope`), and the HS256 session JWTs issued at login.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// JWT issuer.
pub const ISSUER: &str = "turnstone";
/// JWT audience of the node server.
pub const AUDIENCE: &str = "turnstone-server";
/// Shortest accepted signing secret.
pub const MIN_SECRET_CHARS: usize = 32;
/// Session cookie set by login and setup.
pub const COOKIE: &str = "turnstone_auth_server";

/// Hierarchical access scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// GET endpoints, SSE streams.
    Read,
    /// Send, create, close, commands.
    Write,
    /// Tool approval, admin.
    Approve,
    /// Cluster-internal (global event stream).
    Service,
}

impl Scope {
    /// Parses one scope name.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "read" => Some(Self::Read),
            "write" => Some(Self::Write),
            "approve" => Some(Self::Approve),
            "service" => Some(Self::Service),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Approve => "approve",
            Self::Service => "service",
        }
    }
}

/// Whether a set of granted scopes satisfies `needed` (scopes are hierarchical).
pub fn has_scope(granted: &[Scope], needed: Scope) -> bool {
    granted.iter().any(|&g| g >= needed)
}

/// Every permission the server checks on top of scopes.
pub const PERMISSIONS: &[&str] = &[
    "workstreams.create",
    "workstreams.close",
    "tools.approve",
    "conversation.modify",
    "admin.users",
    "admin.plugins",
    "admin.skills",
    "admin.settings",
    "admin.audit",
    "admin.policies",
    "admin.usage",
];

/// Permissions of a built-in role (`None` for an unknown role).
pub fn role_permissions(role: &str) -> Option<Vec<&'static str>> {
    let perms: &[&str] = match role {
        "admin" | "builtin-admin" => PERMISSIONS,
        "operator" => &[
            "workstreams.create",
            "workstreams.close",
            "tools.approve",
            "conversation.modify",
        ],
        "viewer" => &[],
        _ => return None,
    };
    Some(perms.to_vec())
}

/// Scopes a role's password login receives.
pub fn role_scopes(role: &str) -> Vec<Scope> {
    match role {
        "admin" | "builtin-admin" | "operator" => vec![Scope::Approve, Scope::Read, Scope::Write],
        _ => vec![Scope::Read],
    }
}

/// Paths anyone may call (after the `/v1` prefix is stripped).
pub fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/" | "/health"
            | "/metrics"
            | "/openapi.json"
            | "/docs"
            | "/api/auth/login"
            | "/api/auth/logout"
            | "/api/auth/status"
            | "/api/auth/setup"
            | "/api/auth/oidc/authorize"
            | "/api/auth/oidc/callback"
    ) || path.starts_with("/static/")
        || path.starts_with("/shared/")
        || is_channel_webhook(path)
}

/// `/channels/{plugin}/webhook`: the platform calls it without our
/// credentials; the channel plugin verifies the platform's signature.
fn is_channel_webhook(path: &str) -> bool {
    matches!(
        path.trim_end_matches('/').split('/').collect::<Vec<_>>().as_slice(),
        ["", "channels", plugin, "webhook"] if !plugin.is_empty()
    )
}

/// Per-workstream POST actions that need `write`.
const WS_WRITE_ACTIONS: &[&str] = &[
    "send",
    "cancel",
    "close",
    "open",
    "delete",
    "title",
    "refresh-title",
    "attachments",
    "speech-to-text",
    "rewind",
    "retry",
];

/// The scope a request needs, or `None` for a public path. `path` is the
/// request path with the `/v1` prefix removed. Unknown mutating routes need
/// `write` (fail closed).
pub fn required_scope(method: &str, path: &str) -> Option<Scope> {
    if is_public(path) {
        return None;
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    // The global stream: the full node view needs `service`; ordinary users
    // get it filtered to their own workstreams (checked by the handler).
    if path == "/api/events/global" {
        return Some(Scope::Read);
    }
    // `/mcp` runs tools with no human in the loop: only for callers who may
    // approve tool calls.
    if path == "/mcp" || path.starts_with("/mcp/") {
        return Some(Scope::Approve);
    }
    let is_admin = segs.len() >= 2 && segs[0] == "api" && matches!(segs[1], "admin" | "_internal");
    match method {
        "GET" | "HEAD" | "OPTIONS" if is_admin => Some(Scope::Approve),
        "GET" | "HEAD" | "OPTIONS" => Some(Scope::Read),
        "POST" => {
            if is_admin {
                return Some(Scope::Approve);
            }
            match segs.as_slice() {
                ["api", "workstreams", _, "approve"] => Some(Scope::Approve),
                ["api", "memories", "search"] => Some(Scope::Read),
                ["api", "workstreams", _, action, ..] if WS_WRITE_ACTIONS.contains(action) => {
                    Some(Scope::Write)
                }
                _ => Some(Scope::Write),
            }
        }
        _ if is_admin => Some(Scope::Approve),
        _ => Some(Scope::Write),
    }
}

/// Session JWT claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// User id.
    pub sub: String,
    /// Login name.
    pub username: String,
    /// Granted scopes, comma-separated (the original's format).
    pub scopes: String,
    /// Granted permissions.
    pub permissions: Vec<String>,
    /// How the session was obtained (`password`, `token`, `setup`).
    pub src: String,
    /// Issuer.
    pub iss: String,
    /// Audience.
    pub aud: String,
    /// Issued at (Unix seconds).
    pub iat: u64,
    /// Expiry (Unix seconds).
    pub exp: u64,
}

impl Claims {
    /// The granted scopes (unknown names ignored).
    pub fn scope_list(&self) -> Vec<Scope> {
        self.scopes.split(',').filter_map(Scope::parse).collect()
    }
}

/// Authentication failures.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// The signing secret is missing or too short.
    #[error(
        "the JWT secret must have at least {MIN_SECRET_CHARS} characters: set TURNSTONE_JWT_SECRET or [auth] jwt_secret"
    )]
    WeakSecret,
    /// A token that is malformed, forged, expired or for another audience.
    #[error("invalid token: {0}")]
    InvalidToken(String),
}

/// Signs and checks session JWTs with one HS256 secret.
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl JwtKeys {
    /// Keys from the configured secret (refused when shorter than 32 characters).
    pub fn new(secret: &str) -> Result<Self, AuthError> {
        if secret.chars().count() < MIN_SECRET_CHARS {
            return Err(AuthError::WeakSecret);
        }
        Ok(Self {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
        })
    }

    /// Issues a token for `claims` (issuer and audience are set here).
    pub fn mint(&self, mut claims: Claims) -> Result<String, AuthError> {
        claims.iss = ISSUER.into();
        claims.aud = AUDIENCE.into();
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| AuthError::InvalidToken(e.to_string()))
    }

    /// Verifies signature, algorithm, issuer, audience and expiry.
    pub fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let mut v = Validation::new(Algorithm::HS256);
        v.set_issuer(&[ISSUER]);
        v.set_audience(&[AUDIENCE]);
        v.leeway = 0;
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &v)
            .map(|d| d.claims)
            .map_err(|e| AuthError::InvalidToken(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn claims(exp: u64) -> Claims {
        Claims {
            sub: "u1".into(),
            username: "alice".into(),
            scopes: "approve,read,write".into(),
            permissions: vec!["tools.approve".into()],
            src: "password".into(),
            iss: String::new(),
            aud: String::new(),
            iat: now(),
            exp,
        }
    }

    #[test]
    fn scopes_are_hierarchical() {
        let write = [Scope::Write];
        assert!(has_scope(&write, Scope::Read));
        assert!(has_scope(&write, Scope::Write));
        assert!(!has_scope(&write, Scope::Approve));
        assert!(!has_scope(&[Scope::Approve], Scope::Service));
        assert!(has_scope(&[Scope::Service], Scope::Approve));
        assert!(!has_scope(&[], Scope::Read));
    }

    #[test]
    fn route_scopes_follow_the_wire_contract() {
        let cases = [
            ("GET", "/health", None),
            ("POST", "/api/auth/login", None),
            ("POST", "/api/auth/setup", None),
            ("GET", "/static/app.js", None),
            ("GET", "/api/auth/whoami", Some(Scope::Read)),
            ("GET", "/api/workstreams", Some(Scope::Read)),
            ("GET", "/api/workstreams/abc/events", Some(Scope::Read)),
            ("POST", "/api/workstreams/new", Some(Scope::Write)),
            ("POST", "/api/workstreams/abc/send", Some(Scope::Write)),
            ("DELETE", "/api/workstreams/abc/send", Some(Scope::Write)),
            ("POST", "/api/workstreams/abc/rewind", Some(Scope::Write)),
            ("POST", "/api/command", Some(Scope::Write)),
            ("POST", "/api/memories/search", Some(Scope::Read)),
            ("DELETE", "/api/memories/note", Some(Scope::Write)),
            ("POST", "/api/workstreams/abc/approve", Some(Scope::Approve)),
            (
                "POST",
                "/api/admin/plugins/web/disable",
                Some(Scope::Approve),
            ),
            ("PUT", "/api/admin/settings/x", Some(Scope::Approve)),
            // Reading admin state is admin work too (the original's read scope
            // would show every plugin's grants to any token).
            ("GET", "/api/admin/plugins", Some(Scope::Approve)),
            ("POST", "/api/admin/mcp-servers", Some(Scope::Approve)),
            ("PUT", "/api/admin/mcp-servers/gh", Some(Scope::Approve)),
            ("DELETE", "/api/admin/mcp-servers/gh", Some(Scope::Approve)),
            ("POST", "/api/_internal/model-reload", Some(Scope::Approve)),
            ("GET", "/api/events/global", Some(Scope::Read)),
            ("POST", "/mcp", Some(Scope::Approve)),
            ("GET", "/mcp", Some(Scope::Approve)),
            ("DELETE", "/mcp", Some(Scope::Approve)),
            ("PATCH", "/api/unknown", Some(Scope::Write)),
        ];
        for (m, p, want) in cases {
            assert_eq!(required_scope(m, p), want, "{m} {p}");
        }
    }

    #[test]
    fn roles_map_to_permissions_and_scopes() {
        assert_eq!(role_permissions("admin").unwrap().len(), PERMISSIONS.len());
        let op = role_permissions("operator").unwrap();
        assert!(op.contains(&"tools.approve") && !op.contains(&"admin.plugins"));
        assert!(role_permissions("viewer").unwrap().is_empty());
        assert!(role_permissions("root").is_none());
        assert_eq!(role_scopes("viewer"), [Scope::Read]);
        assert!(role_scopes("operator").contains(&Scope::Approve));
    }

    #[test]
    fn jwts_round_trip_and_forgeries_are_refused() {
        assert_eq!(JwtKeys::new("short").err(), Some(AuthError::WeakSecret));
        let keys = JwtKeys::new(SECRET).unwrap();
        let token = keys.mint(claims(now() + 3600)).unwrap();
        let back = keys.verify(&token).unwrap();
        assert_eq!(back.sub, "u1");
        assert_eq!(back.iss, ISSUER);
        assert_eq!(back.aud, AUDIENCE);
        assert_eq!(
            back.scope_list(),
            [Scope::Approve, Scope::Read, Scope::Write]
        );
        // Another secret, an expired token, a tampered payload, garbage.
        let other = JwtKeys::new("fedcba9876543210fedcba9876543210").unwrap();
        assert!(other.verify(&token).is_err());
        let expired = keys.mint(claims(now() - 10)).unwrap();
        assert!(keys.verify(&expired).is_err());
        let mut parts: Vec<String> = token.split('.').map(String::from).collect();
        parts[1] = parts[1].chars().rev().collect();
        assert!(keys.verify(&parts.join(".")).is_err());
        assert!(keys.verify("not-a-jwt").is_err());
        // The `none` algorithm is never accepted.
        let header = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0";
        let unsigned = format!("{header}.{}.", token.split('.').nth(1).unwrap());
        assert!(keys.verify(&unsigned).is_err());
    }
}
