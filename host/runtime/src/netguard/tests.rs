//! The classifier, one table per family, each row checked under both settings
//! of `allow_private_network`; and every row of the address table has a case.

use super::AddressClass::{Metadata, Private, Public, Reserved};
use super::*;

/// (address, expected class). Written from the registries, not from the table.
const V4_CASES: &[(&str, AddressClass)] = &[
    ("0.0.0.0", Reserved),
    ("0.1.2.3", Reserved),
    ("10.0.0.1", Private),
    ("10.255.255.255", Private),
    ("100.64.0.1", Private),
    ("100.127.255.254", Private),
    ("100.128.0.1", Public),
    ("127.0.0.1", Private),
    ("127.8.9.1", Private),
    ("169.254.1.1", Reserved),
    ("169.254.255.255", Reserved),
    ("172.16.0.1", Private),
    ("172.31.255.255", Private),
    ("172.32.0.1", Public),
    ("192.0.0.1", Reserved),
    ("192.0.0.8", Reserved),
    ("192.0.0.170", Reserved),
    ("192.0.0.9", Public),
    ("192.0.0.10", Public),
    ("192.0.2.1", Reserved),
    ("192.31.196.1", Public),
    ("192.52.193.1", Public),
    ("192.88.99.1", Reserved),
    ("192.168.1.1", Private),
    ("192.175.48.1", Public),
    ("198.18.0.1", Reserved),
    ("198.19.255.255", Reserved),
    ("198.20.0.1", Public),
    ("198.51.100.7", Reserved),
    ("203.0.113.7", Reserved),
    ("224.0.0.1", Reserved),
    ("239.255.255.250", Reserved),
    ("240.0.0.1", Reserved),
    ("255.255.255.254", Reserved),
    ("255.255.255.255", Reserved),
    ("1.1.1.1", Public),
    ("8.8.8.8", Public),
    ("93.184.216.34", Public),
];

/// Cloud metadata: refused under both settings.
const METADATA_CASES: &[(&str, AddressClass)] = &[
    ("169.254.169.254", Metadata),
    ("169.254.170.2", Metadata),
    ("169.254.170.23", Metadata),
    ("169.254.0.23", Metadata),
    ("100.100.100.200", Metadata),
    ("168.63.129.16", Metadata),
    ("192.0.0.192", Metadata),
    ("fd00:ec2::254", Metadata),
    ("fd00:ec2::23", Metadata),
    ("168.63.129.17", Public),
];

const V6_CASES: &[(&str, AddressClass)] = &[
    ("::", Reserved),
    ("::1", Private),
    ("100::1", Reserved),
    ("100::ffff:ffff:ffff:ffff", Reserved),
    ("2001:2::1", Reserved),
    ("2001:2:0:ffff::1", Reserved),
    ("2001:10::1", Reserved),
    ("2001:1f::1", Reserved),
    ("2001:20::1", Public),
    ("2001:30::1", Public),
    ("2001:1::1", Public),
    ("2001:1::2", Public),
    ("2001:1::3", Public),
    ("2001:1::4", Reserved),
    ("2001:3::1", Public),
    ("2001:4:112::1", Public),
    ("2001:5::1", Reserved),
    ("2001:db8::1", Reserved),
    ("3fff::1", Reserved),
    ("3fff:fff::1", Reserved),
    ("5f00::1", Reserved),
    ("fc00::1", Private),
    ("fd12:3456::1", Private),
    ("fe80::1", Reserved),
    ("febf::1", Reserved),
    ("fec0::1", Reserved),
    ("ff02::1", Reserved),
    ("ff05::fb", Reserved),
    ("4000::1", Reserved),
    ("e000::1", Reserved),
    ("1234::1", Reserved),
    ("2606:4700::1111", Public),
    ("2a00:1450::1", Public),
    ("2620:4f:8000::1", Public),
];

/// Every IPv4-in-IPv6 form, carrying loopback, metadata, private and public.
const EMBEDDED_CASES: &[(&str, AddressClass)] = &[
    // IPv4-mapped.
    ("::ffff:127.0.0.1", Private),
    ("::ffff:10.0.0.1", Private),
    ("::ffff:169.254.169.254", Metadata),
    ("::ffff:169.254.1.1", Reserved),
    ("::ffff:8.8.8.8", Public),
    // IPv4-compatible (deprecated: never public).
    ("::127.0.0.1", Reserved),
    ("::8.8.8.8", Reserved),
    ("::169.254.169.254", Metadata),
    // NAT64 well-known prefix.
    ("64:ff9b::a00:1", Private),
    ("64:ff9b::7f00:1", Private),
    ("64:ff9b::a9fe:a9fe", Metadata),
    ("64:ff9b::808:808", Public),
    // NAT64 local-use prefix: never opened; metadata at every RFC 6052 position.
    ("64:ff9b:1::808:808", Reserved),
    ("64:ff9b:1::7f00:1", Reserved),
    ("64:ff9b:1::a9fe:a9fe", Metadata), // /96 form of 169.254.169.254
    ("64:ff9b:1:0:a9:fea9:fe00:0", Metadata), // /64 form
    ("64:ff9b:1:a9:fe:a9fe::", Metadata), // /56 form
    ("64:ff9b:1:a9fe:a9:fe00::", Metadata), // /48 form
    // 6to4.
    ("2002:7f00:1::", Private),
    ("2002:a9fe:a9fe::1", Metadata),
    ("2002:c000:2ff::", Reserved),
    ("2002:808:808::1", Public),
    // Teredo: the client is the inverted last 32 bits.
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", Private), // client 127.0.0.1
    ("2001:0:4136:e378:8000:63bf:5601:5601", Metadata), // client 169.254.169.254
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", Private), // client 10.0.0.1
    ("2001:0:4136:e378:8000:63bf:3fd5:42a9", Public),  // client 192.42.189.86
    ("2001:0:a9fe:a9fe::1", Metadata),                 // server 169.254.169.254
];

fn check(cases: &[(&str, AddressClass)]) {
    let closed = NetworkPolicy::default();
    let open = NetworkPolicy {
        allow_private_network: true,
        ..NetworkPolicy::default()
    };
    for (ip, want) in cases {
        let addr: IpAddr = ip.parse().unwrap();
        let got = verdict(addr);
        assert_eq!(got.class, *want, "{ip}: {}", got.block);
        assert_eq!(closed.allows(got.class), *want == Public, "{ip} by default");
        assert_eq!(
            open.allows(got.class),
            matches!(want, Public | Private),
            "{ip} with allow_private_network"
        );
    }
}

#[test]
fn ipv4_special_purpose_registry() {
    check(V4_CASES);
}

#[test]
fn cloud_metadata_is_never_reachable() {
    check(METADATA_CASES);
}

#[test]
fn ipv6_special_purpose_registry_and_reserved_space() {
    check(V6_CASES);
}

#[test]
fn ipv4_in_ipv6_forms_are_unwrapped() {
    check(EMBEDDED_CASES);
}

#[test]
fn every_table_row_has_a_case() {
    let all: Vec<IpAddr> = [V4_CASES, METADATA_CASES, V6_CASES, EMBEDDED_CASES]
        .concat()
        .iter()
        .map(|(ip, _)| ip.parse().unwrap())
        .collect();
    for row in table::V4 {
        let hit = all.iter().any(|ip| match ip {
            IpAddr::V4(v4) => table::v4_row(*v4).is_some_and(|r| std::ptr::eq(r, row)),
            IpAddr::V6(_) => false,
        });
        assert!(hit, "no case for {}", row.name);
    }
    for row in table::V6 {
        let hit = all.iter().any(|ip| match ip {
            IpAddr::V6(v6) => std::ptr::eq(table::v6_row(*v6), row),
            IpAddr::V4(_) => false,
        });
        assert!(hit, "no case for {}", row.name);
    }
}

#[test]
fn refusals_name_the_block() {
    let v = verdict("::ffff:169.254.1.1".parse().unwrap());
    assert!(
        v.block.contains("link-local (169.254.0.0/16)") && v.block.contains("IPv4-mapped"),
        "{}",
        v.block
    );
}

#[test]
fn url_authority_is_checked_before_parsing() {
    for ok in [
        "http://example.com/",
        "https://example.com:8443/x?y#z",
        "http://user:pw@example.com/",
        "http://[2606:4700::1111]/",
    ] {
        assert_eq!(check_url_authority(ok), Ok(()), "{ok}");
    }
    for no_host in [
        "http:///nohost",
        "http://",
        "https://:443/x",
        "http://user@/x",
        "http:\\\\\\x",
        "nohost",
    ] {
        assert!(
            matches!(check_url_authority(no_host), Err(GuardError::NoHost { .. })),
            "{no_host}"
        );
    }
    let zone = check_url_authority("http://[fd00::1%eth0]/").unwrap_err();
    assert!(matches!(zone, GuardError::ZoneId { .. }), "{zone}");
    assert!(zone.to_string().contains("zone id"), "{zone}");
    let zone = check_url_authority("http://[fe80::1%25eth0]:8080/").unwrap_err();
    assert!(matches!(zone, GuardError::ZoneId { .. }), "{zone}");
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

/// Counts lookups, to prove a refusal happened before any.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);
impl Resolve for Counting {
    fn resolve(
        &self,
        _host: &str,
        _port: u16,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<Resolved>>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(Vec::new()) })
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
        ..NetworkPolicy::default()
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
    assert!(err.to_string().contains("allow_private_network"), "{err}");
    assert!(
        policy(&["10.0.0.1"], true)
            .screen("a.test", 80)
            .await
            .is_ok()
    );
    // The opt-in opens private networks, never link-local beside them.
    let err = policy(&["10.0.0.1", "169.254.170.9"], true)
        .screen("a.test", 80)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            GuardError::Blocked {
                class: Reserved,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("never opened"), "{err}");
    let err = policy(&[], false)
        .screen("169.254.169.254", 80)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        GuardError::Blocked {
            class: Metadata,
            ..
        }
    ));
    assert!(err.to_string().contains("cloud metadata"), "{err}");
    let err = policy(&[], true)
        .screen("[::ffff:169.254.169.254]", 80)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            GuardError::Blocked {
                class: Metadata,
                ..
            }
        ),
        "never allowed"
    );
    let err = policy(&[], false)
        .screen("[::ffff:127.0.0.1]", 80)
        .await
        .unwrap_err();
    assert!(matches!(err, GuardError::Blocked { class: Private, .. }));
}

#[tokio::test]
async fn malformed_hosts_are_refused_without_a_lookup() {
    let counting = Arc::new(Counting::default());
    let p = NetworkPolicy {
        allow_private_network: true,
        resolver: counting.clone(),
        ..NetworkPolicy::default()
    };
    for (host, zone) in [
        ("", false),
        ("[]", false),
        ("[fd00::1%eth0]", true),
        ("fe80::1%eth0", true),
    ] {
        let err = p.screen(host, 80).await.unwrap_err();
        if zone {
            assert!(matches!(err, GuardError::ZoneId { .. }), "{host}: {err}");
        } else {
            assert!(matches!(err, GuardError::NoHost { .. }), "{host}: {err}");
        }
    }
    let err = p.screen("[not-an-ip]", 80).await.unwrap_err();
    assert!(matches!(err, GuardError::Resolve { .. }), "{err}");
    assert_eq!(counting.0.load(std::sync::atomic::Ordering::SeqCst), 0);
}
