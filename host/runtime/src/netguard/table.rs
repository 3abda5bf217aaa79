//! The address table behind the SSRF guard: the IANA IPv4 and IPv6
//! Special-Purpose Address Registries (plus multicast and the IPv6 space the
//! IETF keeps reserved), the cloud metadata endpoints, and how each
//! IPv4-in-IPv6 form embeds its IPv4 address.
//!
//! One row per registry entry; the most specific row containing an address
//! decides. Rows marked "globally reachable" in the registry are public, so
//! they are listed only where they sit inside a larger non-public block.
//! No crate covers the three-way split the guard needs (public / private an
//! operator may open / never), the metadata hosts, and every embedding form,
//! so the table is ours, with a test per row.

use super::AddressClass::{self, Metadata, Private, Public, Reserved};
use std::net::{Ipv4Addr, Ipv6Addr};

/// One IPv4 block.
pub(super) struct V4Row {
    /// Network address.
    pub net: [u8; 4],
    /// Prefix length.
    pub len: u8,
    /// How addresses in it are treated.
    pub class: AddressClass,
    /// What the block is (shown in refusals).
    pub name: &'static str,
}

const fn v4(net: [u8; 4], len: u8, class: AddressClass, name: &'static str) -> V4Row {
    V4Row {
        net,
        len,
        class,
        name,
    }
}

/// IPv4: the special-purpose registry, multicast, and metadata hosts.
pub(super) static V4: &[V4Row] = &[
    v4([0, 0, 0, 0], 8, Reserved, "\"this network\" (0.0.0.0/8)"),
    v4([10, 0, 0, 0], 8, Private, "private-use (10.0.0.0/8)"),
    v4(
        [100, 64, 0, 0],
        10,
        Private,
        "shared address space (100.64.0.0/10)",
    ),
    v4([127, 0, 0, 0], 8, Private, "loopback (127.0.0.0/8)"),
    v4(
        [169, 254, 0, 0],
        16,
        Reserved,
        "link-local (169.254.0.0/16)",
    ),
    v4([172, 16, 0, 0], 12, Private, "private-use (172.16.0.0/12)"),
    v4(
        [192, 0, 0, 0],
        24,
        Reserved,
        "IETF protocol assignments (192.0.0.0/24)",
    ),
    v4(
        [192, 0, 0, 9],
        32,
        Public,
        "Port Control Protocol anycast (192.0.0.9/32)",
    ),
    v4([192, 0, 0, 10], 32, Public, "TURN anycast (192.0.0.10/32)"),
    v4([192, 0, 2, 0], 24, Reserved, "documentation (192.0.2.0/24)"),
    v4(
        [192, 88, 99, 0],
        24,
        Reserved,
        "deprecated 6to4 relay anycast (192.88.99.0/24)",
    ),
    v4(
        [192, 168, 0, 0],
        16,
        Private,
        "private-use (192.168.0.0/16)",
    ),
    v4(
        [198, 18, 0, 0],
        15,
        Reserved,
        "benchmarking (198.18.0.0/15)",
    ),
    v4(
        [198, 51, 100, 0],
        24,
        Reserved,
        "documentation (198.51.100.0/24)",
    ),
    v4(
        [203, 0, 113, 0],
        24,
        Reserved,
        "documentation (203.0.113.0/24)",
    ),
    v4([224, 0, 0, 0], 4, Reserved, "multicast (224.0.0.0/4)"),
    v4([240, 0, 0, 0], 4, Reserved, "reserved (240.0.0.0/4)"),
    v4(
        [255, 255, 255, 255],
        32,
        Reserved,
        "limited broadcast (255.255.255.255/32)",
    ),
    // Cloud metadata: refused always, even where the block around them opens.
    v4(
        [169, 254, 169, 254],
        32,
        Metadata,
        "cloud metadata (169.254.169.254)",
    ),
    v4(
        [169, 254, 170, 2],
        32,
        Metadata,
        "AWS ECS task metadata (169.254.170.2)",
    ),
    v4(
        [169, 254, 170, 23],
        32,
        Metadata,
        "AWS EKS pod identity (169.254.170.23)",
    ),
    v4(
        [169, 254, 0, 23],
        32,
        Metadata,
        "Tencent Cloud metadata (169.254.0.23)",
    ),
    v4(
        [100, 100, 100, 200],
        32,
        Metadata,
        "Alibaba Cloud metadata (100.100.100.200)",
    ),
    v4(
        [168, 63, 129, 16],
        32,
        Metadata,
        "Azure wire server (168.63.129.16)",
    ),
    v4(
        [192, 0, 0, 192],
        32,
        Metadata,
        "Oracle Cloud metadata (192.0.0.192)",
    ),
];

/// How an IPv6 block relates to IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Embedding {
    /// A plain IPv6 block.
    None,
    /// `::ffff:a.b.c.d`: the socket connects to the IPv4 address itself.
    Mapped,
    /// `::a.b.c.d` (deprecated IPv4-compatible).
    Compatible,
    /// A NAT64 prefix: every RFC 6052 position is a candidate.
    Nat64 {
        /// Prefix length (the /96 well-known prefix has one position).
        prefix_len: u8,
    },
    /// `2002:AABB:CCDD::/48`: bits 16-47.
    SixToFour,
    /// `2001:0:SSSS:SSSS:flags:port:CCCC:CCCC`: server bits 32-63, client the
    /// inverted last 32 bits.
    Teredo,
}

/// One IPv6 block.
pub(super) struct V6Row {
    /// Network address.
    pub net: u128,
    /// Prefix length.
    pub len: u8,
    /// How addresses in it are treated (for embedding rows: the least strict
    /// outcome; the embedded IPv4 address can only make it stricter).
    pub class: AddressClass,
    /// IPv4 inside it, if any.
    pub embedding: Embedding,
    /// What the block is (shown in refusals).
    pub name: &'static str,
}

const fn v6(
    net: u128,
    len: u8,
    class: AddressClass,
    embedding: Embedding,
    name: &'static str,
) -> V6Row {
    V6Row {
        net,
        len,
        class,
        embedding,
        name,
    }
}

use Embedding::{Compatible, Mapped, Nat64, SixToFour, Teredo};
const NONE: Embedding = Embedding::None;

/// IPv6: everything outside global unicast (2000::/3) is reserved by the IETF;
/// inside it, the special-purpose registry; plus ULA, link-local, multicast
/// and the metadata hosts.
pub(super) static V6: &[V6Row] = &[
    v6(
        0,
        0,
        Reserved,
        NONE,
        "reserved by the IETF (outside 2000::/3)",
    ),
    v6(0x2000 << 112, 3, Public, NONE, "global unicast (2000::/3)"),
    v6(0, 128, Reserved, NONE, "unspecified (::)"),
    v6(1, 128, Private, NONE, "loopback (::1)"),
    v6(
        0,
        96,
        Reserved,
        Compatible,
        "IPv4-compatible (::/96, deprecated)",
    ),
    v6(
        0xffff << 32,
        96,
        Public,
        Mapped,
        "IPv4-mapped (::ffff:0:0/96)",
    ),
    v6(
        0x0064_ff9b << 96,
        96,
        Public,
        Nat64 { prefix_len: 96 },
        "NAT64 well-known prefix (64:ff9b::/96)",
    ),
    // A local-use translator may sit at any prefix length inside the /48 and
    // map to any IPv4 address, so the destination cannot be known: never opened.
    v6(
        0x0064_ff9b_0001 << 80,
        48,
        Reserved,
        Nat64 { prefix_len: 48 },
        "NAT64 local-use prefix (64:ff9b:1::/48)",
    ),
    v6(0x0100 << 112, 64, Reserved, NONE, "discard-only (100::/64)"),
    v6(
        0x2001 << 112,
        23,
        Reserved,
        NONE,
        "IETF protocol assignments (2001::/23)",
    ),
    v6(0x2001 << 112, 32, Public, Teredo, "Teredo (2001::/32)"),
    v6(
        (0x2001_0001 << 96) | 1,
        128,
        Public,
        NONE,
        "Port Control Protocol anycast (2001:1::1)",
    ),
    v6(
        (0x2001_0001 << 96) | 2,
        128,
        Public,
        NONE,
        "TURN anycast (2001:1::2)",
    ),
    v6(
        (0x2001_0001 << 96) | 3,
        128,
        Public,
        NONE,
        "DNS-SD service registration anycast (2001:1::3)",
    ),
    v6(
        0x2001_0002 << 96,
        48,
        Reserved,
        NONE,
        "benchmarking (2001:2::/48)",
    ),
    v6(0x2001_0003 << 96, 32, Public, NONE, "AMT (2001:3::/32)"),
    v6(
        0x2001_0004_0112 << 80,
        48,
        Public,
        NONE,
        "AS112-v6 (2001:4:112::/48)",
    ),
    v6(
        0x2001_0010 << 96,
        28,
        Reserved,
        NONE,
        "ORCHID (2001:10::/28, deprecated)",
    ),
    v6(
        0x2001_0020 << 96,
        28,
        Public,
        NONE,
        "ORCHIDv2 (2001:20::/28)",
    ),
    v6(
        0x2001_0030 << 96,
        28,
        Public,
        NONE,
        "drone remote ID (2001:30::/28)",
    ),
    v6(
        0x2001_0db8 << 96,
        32,
        Reserved,
        NONE,
        "documentation (2001:db8::/32)",
    ),
    v6(0x2002 << 112, 16, Public, SixToFour, "6to4 (2002::/16)"),
    v6(
        0x3fff << 112,
        20,
        Reserved,
        NONE,
        "documentation (3fff::/20)",
    ),
    v6(
        0x5f00 << 112,
        16,
        Reserved,
        NONE,
        "segment routing SIDs (5f00::/16)",
    ),
    v6(0xfc00 << 112, 7, Private, NONE, "unique local (fc00::/7)"),
    v6(0xfe80 << 112, 10, Reserved, NONE, "link-local (fe80::/10)"),
    v6(
        0xfec0 << 112,
        10,
        Reserved,
        NONE,
        "site-local (fec0::/10, deprecated)",
    ),
    v6(0xff00 << 112, 8, Reserved, NONE, "multicast (ff00::/8)"),
    v6(
        (0xfd00_0ec2 << 96) | 0x254,
        128,
        Metadata,
        NONE,
        "AWS instance metadata (fd00:ec2::254)",
    ),
    v6(
        (0xfd00_0ec2 << 96) | 0x23,
        128,
        Metadata,
        NONE,
        "AWS EKS pod identity (fd00:ec2::23)",
    ),
];

fn mask(len: u8, bits: u32) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX << (bits - u32::from(len))) & (u128::MAX >> (128 - bits))
    }
}

/// The most specific IPv4 row containing `ip` (`None`: no special purpose).
pub(super) fn v4_row(ip: Ipv4Addr) -> Option<&'static V4Row> {
    let a = u128::from(u32::from(ip));
    V4.iter()
        .filter(|r| {
            let m = mask(r.len, 32);
            a & m == u128::from(u32::from(Ipv4Addr::from(r.net))) & m
        })
        .max_by_key(|r| r.len)
}

/// The most specific IPv6 row containing `ip` (the ::/0 row always matches).
pub(super) fn v6_row(ip: Ipv6Addr) -> &'static V6Row {
    let a = u128::from(ip);
    V6.iter()
        .filter(|r| {
            let m = mask(r.len, 128);
            a & m == r.net & m
        })
        .max_by_key(|r| r.len)
        .unwrap_or(&V6[0])
}

fn v4_at(a: u128, hi_bit: u32) -> Ipv4Addr {
    // `hi_bit` counts from the most significant bit of the 128.
    Ipv4Addr::from(((a >> (96 - hi_bit)) & 0xffff_ffff) as u32)
}

/// Every IPv4 address `ip` may stand for under `embedding`.
pub(super) fn embedded(ip: Ipv6Addr, embedding: Embedding) -> Vec<Ipv4Addr> {
    let a = u128::from(ip);
    match embedding {
        Embedding::None => Vec::new(),
        Mapped | Compatible => vec![v4_at(a, 96)],
        SixToFour => vec![v4_at(a, 16)],
        Teredo => vec![Ipv4Addr::from(!(a as u32)), v4_at(a, 32)],
        Nat64 { prefix_len } => {
            // RFC 6052 §2.2: bits 64-71 (the u octet) are skipped.
            let split = |hi: u32, hi_bits: u32| {
                let upper = (a >> (128 - hi - hi_bits)) & ((1 << hi_bits) - 1);
                let lo_bits = 32 - hi_bits;
                let lower = (a >> (128 - 72 - lo_bits)) & ((1 << lo_bits) - 1);
                Ipv4Addr::from(((upper << lo_bits) | lower) as u32)
            };
            let mut out = vec![v4_at(a, 96)];
            if prefix_len <= 64 {
                out.push(v4_at(a, 72)); // /64
            }
            if prefix_len <= 56 {
                out.push(split(56, 8)); // /56
            }
            if prefix_len <= 48 {
                out.push(split(48, 16)); // /48
            }
            out
        }
    }
}
