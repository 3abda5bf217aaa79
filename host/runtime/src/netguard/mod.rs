//! The SSRF guard for the `<public>` HTTP grant: a plugin allowed "any public
//! host" may only reach addresses that are public. The host resolves the name
//! itself, screens **every** resolved address, and connects to a screened
//! address (never re-resolving), so DNS rebinding cannot slip past. Guests
//! follow redirects themselves, so every hop is a new request through this
//! guard.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

mod table;

/// How an address is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Routable on the public internet.
    Public,
    /// A private network an operator may open with `allow_private_network`:
    /// private-use (RFC 1918), shared (CGNAT), loopback and unique-local.
    Private,
    /// Never reachable, whatever the settings: link-local, multicast,
    /// unspecified, broadcast, documentation, benchmarking, discard-only and
    /// every other block that is not globally reachable.
    Reserved,
    /// Cloud metadata endpoints: refused always.
    Metadata,
}

impl AddressClass {
    /// How strict the class is: where several apply, the strictest wins.
    fn rank(self) -> u8 {
        match self {
            Self::Public => 0,
            Self::Private => 1,
            Self::Reserved => 2,
            Self::Metadata => 3,
        }
    }
}

/// An address's class and the registry block that decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// How the address is treated.
    pub class: AddressClass,
    /// The deciding block, e.g. `link-local (169.254.0.0/16)`; for an
    /// IPv4-in-IPv6 form it names both.
    pub block: String,
}

fn verdict_v4(ip: Ipv4Addr) -> Verdict {
    match table::v4_row(ip) {
        Some(row) => Verdict {
            class: row.class,
            block: row.name.to_string(),
        },
        None => Verdict {
            class: AddressClass::Public,
            block: "public".into(),
        },
    }
}

fn verdict_v6(ip: Ipv6Addr) -> Verdict {
    let row = table::v6_row(ip);
    let mut out = Verdict {
        class: row.class,
        block: row.name.to_string(),
    };
    // Every IPv4 address the form may stand for is screened; the strictest wins.
    for v4 in table::embedded(ip, row.embedding) {
        let inner = verdict_v4(v4);
        if inner.class.rank() > out.class.rank() {
            out = Verdict {
                class: inner.class,
                block: format!("{} as {v4} in {}", inner.block, row.name),
            };
        }
    }
    out
}

/// Classifies `ip` with the block that decided it, looking through every
/// IPv4-in-IPv6 form (mapped, compatible, NAT64 well-known and local-use,
/// 6to4, Teredo), so `[::ffff:127.0.0.1]` is loopback.
pub fn verdict(ip: IpAddr) -> Verdict {
    match ip {
        IpAddr::V4(v4) => verdict_v4(v4),
        IpAddr::V6(v6) => verdict_v6(v6),
    }
}

/// The class of `ip` (see [`verdict`]).
pub fn classify(ip: IpAddr) -> AddressClass {
    verdict(ip).class
}

/// Checks the authority of a raw `http(s)://` URL before any parser
/// normalises it: a missing host (`http:///x`, which URL parsers read as host
/// `x`) and IPv6 zone ids (`[fe80::1%eth0]`, an interface-scoped address) are
/// refused with the reason.
pub fn check_url_authority(raw: &str) -> Result<(), GuardError> {
    let raw = raw.trim();
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err(GuardError::NoHost { url: raw.into() });
    };
    if scheme.is_empty() || scheme.contains(['/', '\\', '?', '#']) {
        return Err(GuardError::NoHost { url: raw.into() });
    }
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() || host.starts_with(':') {
        return Err(GuardError::NoHost { url: raw.into() });
    }
    if host.starts_with('[') && host.contains('%') {
        return Err(GuardError::ZoneId { host: host.into() });
    }
    Ok(())
}

/// One resolved address: the one screened and the one connected to. They are
/// equal in production; a test resolver may route a screened public address to
/// a loopback listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// The address the guard judges.
    pub screened: IpAddr,
    /// Where the connection goes.
    pub connect: SocketAddr,
}

/// Name resolution for guarded requests.
pub trait Resolve: Send + Sync {
    /// Resolves `host:port`.
    fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<Resolved>>>;
}

/// The system resolver.
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<Resolved>>> {
        let target = format!("{host}:{port}");
        Box::pin(async move {
            Ok(tokio::net::lookup_host(target)
                .await?
                .map(|a| Resolved {
                    screened: a.ip(),
                    connect: a,
                })
                .collect())
        })
    }
}

/// The operator's network policy for `<public>` grants.
#[derive(Clone)]
pub struct NetworkPolicy {
    /// `[tools] allow_private_network`: private addresses become reachable
    /// (metadata endpoints never do).
    pub allow_private_network: bool,
    /// Resolver (overridable in tests).
    pub resolver: Arc<dyn Resolve>,
    /// Certificate authorities trusted besides the Web PKI roots, for every
    /// TLS connection a plugin makes (a private model server's CA).
    pub extra_roots: Arc<[rustls::pki_types::CertificateDer<'static>]>,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        Self {
            allow_private_network: false,
            resolver: Arc::new(SystemResolver),
            extra_roots: Arc::new([]),
        }
    }
}

impl std::fmt::Debug for NetworkPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkPolicy")
            .field("allow_private_network", &self.allow_private_network)
            .field("extra_roots", &self.extra_roots.len())
            .finish_non_exhaustive()
    }
}

/// Why a guarded request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GuardError {
    /// The name did not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// Host name.
        host: String,
        /// Resolver message.
        reason: String,
    },
    /// The URL names no host.
    #[error("SSRF guard: {url:?} has no host; write http://HOST/PATH")]
    NoHost {
        /// The URL as given.
        url: String,
    },
    /// An IPv6 literal with a zone id: interface-scoped, never public.
    #[error(
        "SSRF guard: {host} carries an IPv6 zone id (an interface-scoped address); such addresses are never fetched"
    )]
    ZoneId {
        /// The bracketed host as given.
        host: String,
    },
    /// An address is not public.
    #[error("{}", blocked_message(.host, .ip, *.class, .block))]
    Blocked {
        /// Host name as requested.
        host: String,
        /// The offending address.
        ip: IpAddr,
        /// Its class (never `Public`).
        class: AddressClass,
        /// The registry block it fell in.
        block: String,
    },
}

fn blocked_message(host: &str, ip: &IpAddr, class: AddressClass, block: &str) -> String {
    let (kind, tail) = match class {
        AddressClass::Private => (
            "private",
            "; only public addresses may be fetched (set [tools] allow_private_network = true to allow private networks)",
        ),
        AddressClass::Metadata => (
            "cloud metadata",
            "; it is never fetched, whatever the settings",
        ),
        AddressClass::Reserved | AddressClass::Public => (
            "non-public",
            "; only public addresses may be fetched, and this range is never opened (not even by allow_private_network)",
        ),
    };
    format!("SSRF guard: {host} resolves to {ip}, a {kind} address: {block}{tail}")
}

impl NetworkPolicy {
    /// Whether an address of `class` may be connected to under this policy.
    pub fn allows(&self, class: AddressClass) -> bool {
        match class {
            AddressClass::Public => true,
            AddressClass::Private => self.allow_private_network,
            AddressClass::Reserved | AddressClass::Metadata => false,
        }
    }

    /// Resolves `host` and screens every address; returns where to connect.
    pub async fn screen(&self, host: &str, port: u16) -> Result<SocketAddr, GuardError> {
        let bracketed = host.starts_with('[');
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.is_empty() {
            return Err(GuardError::NoHost { url: host.into() });
        }
        if bare.contains('%') {
            return Err(GuardError::ZoneId { host: host.into() });
        }
        let resolved = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![Resolved {
                screened: ip,
                connect: SocketAddr::new(ip, port),
            }],
            // A bracketed host is an IPv6 literal or nothing: never a name.
            Err(_) if bracketed => {
                return Err(GuardError::Resolve {
                    host: host.to_string(),
                    reason: "not an IPv6 address".into(),
                });
            }
            Err(_) => self
                .resolver
                .resolve(bare, port)
                .await
                .map_err(|e| GuardError::Resolve {
                    host: host.to_string(),
                    reason: e.to_string(),
                })?,
        };
        if resolved.is_empty() {
            return Err(GuardError::Resolve {
                host: host.to_string(),
                reason: "no addresses".into(),
            });
        }
        // Every address must pass: a name with one private answer could be
        // steered to it.
        for r in &resolved {
            let v = verdict(r.screened);
            if !self.allows(v.class) {
                return Err(GuardError::Blocked {
                    host: host.to_string(),
                    ip: r.screened,
                    class: v.class,
                    block: v.block,
                });
            }
        }
        Ok(resolved[0].connect)
    }
}

#[cfg(test)]
mod tests;
