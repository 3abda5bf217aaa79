//! The SSRF guard for the `<public>` HTTP grant: a plugin allowed "any public
//! host" may only reach addresses that are public. The host resolves the name
//! itself, screens **every** resolved address, and connects to a screened
//! address (never re-resolving), so DNS rebinding cannot slip past. Guests
//! follow redirects themselves, so every hop is a new request through this
//! guard.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// How an address is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Routable on the public internet.
    Public,
    /// Loopback, private, link-local, CGNAT, multicast, reserved or unspecified.
    Private,
    /// Cloud metadata endpoints: refused even when private networks are allowed.
    Metadata,
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let o = ip.octets();
    if o == [169, 254, 169, 254] || o == [100, 100, 100, 200] {
        return AddressClass::Metadata;
    }
    let private = ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1])) // CGNAT 100.64/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19)) // benchmarking
        || o[0] >= 240; // reserved
    if private {
        AddressClass::Private
    } else {
        AddressClass::Public
    }
}

/// Classifies `ip`, looking through IPv4-in-IPv6 forms (mapped, compatible,
/// NAT64 and 6to4) so `[::ffff:127.0.0.1]` is loopback.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let seg = ip.segments();
    // AWS IMDS over IPv6.
    if seg == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254] {
        return AddressClass::Metadata;
    }
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if seg[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified() {
        return classify_v4(embedded(seg[6], seg[7])); // IPv4-compatible (deprecated)
    }
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(embedded(seg[6], seg[7])); // NAT64
    }
    if seg[0] == 0x2002 {
        return classify_v4(embedded(seg[1], seg[2])); // 6to4
    }
    let private = ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (seg[0] & 0xfe00) == 0xfc00 // unique local
        || (seg[0] & 0xffc0) == 0xfe80 // link-local
        || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        || (seg[0] == 0x0100 && seg[1..4] == [0, 0, 0]); // discard-only
    if private {
        AddressClass::Private
    } else {
        AddressClass::Public
    }
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
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        Self {
            allow_private_network: false,
            resolver: Arc::new(SystemResolver),
        }
    }
}

impl std::fmt::Debug for NetworkPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkPolicy")
            .field("allow_private_network", &self.allow_private_network)
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
    /// An address is not public.
    #[error(
        "SSRF guard: {host} resolves to {ip}, a {kind} address; only public addresses may be fetched{hint}"
    )]
    Blocked {
        /// Host name as requested.
        host: String,
        /// The offending address.
        ip: IpAddr,
        /// "private" or "cloud metadata".
        kind: &'static str,
        /// How to allow it, if it can be allowed.
        hint: &'static str,
    },
}

impl NetworkPolicy {
    /// Resolves `host` and screens every address; returns where to connect.
    pub async fn screen(&self, host: &str, port: u16) -> Result<SocketAddr, GuardError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let resolved = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![Resolved {
                screened: ip,
                connect: SocketAddr::new(ip, port),
            }],
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
            match classify(r.screened) {
                AddressClass::Public => {}
                AddressClass::Private if self.allow_private_network => {}
                AddressClass::Private => {
                    return Err(GuardError::Blocked {
                        host: host.to_string(),
                        ip: r.screened,
                        kind: "private",
                        hint: " (set [tools] allow_private_network = true to allow private networks)",
                    });
                }
                AddressClass::Metadata => {
                    return Err(GuardError::Blocked {
                        host: host.to_string(),
                        ip: r.screened,
                        kind: "cloud metadata",
                        hint: "",
                    });
                }
            }
        }
        Ok(resolved[0].connect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> AddressClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn addresses_are_classified() {
        for ip in [
            "127.0.0.1",
            "127.8.9.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            assert_eq!(class(ip), AddressClass::Private, "{ip}");
        }
        for ip in ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"] {
            assert_eq!(class(ip), AddressClass::Metadata, "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class(ip), AddressClass::Public, "{ip}");
        }
    }

    struct Fixed(Vec<Resolved>);
    impl Resolve for Fixed {
        fn resolve(
            &self,
            _host: &str,
            _port: u16,
        ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<Resolved>>> {
            let v = self.0.clone();
            Box::pin(async move { Ok(v) })
        }
    }

    fn policy(ips: &[&str], allow_private: bool) -> NetworkPolicy {
        NetworkPolicy {
            allow_private_network: allow_private,
            resolver: Arc::new(Fixed(
                ips.iter()
                    .map(|i| {
                        let ip: IpAddr = i.parse().unwrap();
                        Resolved {
                            screened: ip,
                            connect: SocketAddr::new(ip, 80),
                        }
                    })
                    .collect(),
            )),
        }
    }

    #[tokio::test]
    async fn every_resolved_address_must_pass() {
        assert!(
            policy(&["93.184.216.34"], false)
                .screen("a.test", 80)
                .await
                .is_ok()
        );
        let err = policy(&["93.184.216.34", "10.0.0.1"], false)
            .screen("a.test", 80)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("10.0.0.1, a private address"),
            "{err}"
        );
        assert!(
            policy(&["10.0.0.1"], true)
                .screen("a.test", 80)
                .await
                .is_ok()
        );
        let err = policy(&[], false)
            .screen("169.254.169.254", 80)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            GuardError::Blocked {
                kind: "cloud metadata",
                ..
            }
        ));
        let err = policy(&[], true)
            .screen("[::ffff:169.254.169.254]", 80)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                GuardError::Blocked {
                    kind: "cloud metadata",
                    ..
                }
            ),
            "never allowed"
        );
        let err = policy(&[], false)
            .screen("[::ffff:127.0.0.1]", 80)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            GuardError::Blocked {
                kind: "private",
                ..
            }
        ));
    }
}
