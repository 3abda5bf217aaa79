//! Unit tests of [`super`]: parsing, the request ∩ grant intersection and
//! the denial hints.

use super::*;

fn caps_http(hosts: &[&str]) -> Capabilities {
    Capabilities {
        http: hosts.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn host_patterns_match_exactly_what_they_name() {
    let p = HostPattern::parse("api.example.com").unwrap();
    assert!(p.matches("API.example.com", 443));
    assert!(!p.matches("evil-api.example.com", 443));
    let w = HostPattern::parse("*.example.com").unwrap();
    assert!(w.matches("a.example.com", 80));
    assert!(!w.matches("example.com", 80));
    assert!(!w.matches("aexample.com", 80));
    let port = HostPattern::parse("127.0.0.1:8080").unwrap();
    assert!(port.matches("127.0.0.1", 8080));
    assert!(!port.matches("127.0.0.1", 8081));
    let v6 = HostPattern::parse("[::1]:9000").unwrap();
    assert!(v6.matches("[::1]", 9000));
}

#[test]
fn footgun_forms_are_rejected() {
    assert!(HostPattern::parse("*").is_err());
    assert!(HostPattern::parse("").is_err());
    assert!(HostPattern::parse("a.com/path").is_err());
    assert!(HostPattern::parse("<configured>").is_err());
    assert!(HostPattern::parse("a b.com").is_err());
    // Malformed brackets are refused, not a panic (a fuzzer found `*.[`).
    for raw in ["*.[", "[", "[]", "*.[:1", "[::1"] {
        assert!(HostPattern::parse(raw).is_err(), "{raw}");
    }
    assert!(HostPattern::parse("[::1]:8080").is_ok());
    let bad_path = Capabilities {
        filesystem: vec![FsGrant {
            path: "../etc".into(),
            access: Access::ReadOnly,
        }],
        ..Default::default()
    };
    assert!(bad_path.validate().is_err());
    let bad_exec = Capabilities {
        exec: vec!["*".into()],
        ..Default::default()
    };
    assert!(bad_exec.validate().is_err());
}

#[test]
fn effective_http_is_the_intersection() {
    let (eff, _) = EffectiveCapabilities::new(
        "p",
        &caps_http(&["a.com", "b.com"]),
        &caps_http(&["b.com", "c.com"]),
        None,
    );
    assert!(eff.check_http("b.com", 443).is_ok());
    let denied_a = eff.check_http("a.com", 443).unwrap_err();
    assert!(
        denied_a
            .hint
            .contains("[plugins.grants.p] http = [\"a.com\"]")
    );
    let denied_c = eff.check_http("c.com", 443).unwrap_err();
    assert!(denied_c.hint.contains("manifest does not request it"));
}

#[test]
fn filesystem_access_is_the_weaker_of_request_and_grant() {
    let ws = tempfile::tempdir().unwrap();
    let req = Capabilities {
        filesystem: vec![FsGrant {
            path: "workspace".into(),
            access: Access::ReadWrite,
        }],
        ..Default::default()
    };
    let grant = Capabilities {
        filesystem: vec![FsGrant {
            path: "workspace".into(),
            access: Access::ReadOnly,
        }],
        ..Default::default()
    };
    let (eff, skipped) = EffectiveCapabilities::new("p", &req, &grant, Some(ws.path()));
    assert!(skipped.is_empty());
    assert_eq!(eff.dirs().len(), 1);
    assert_eq!(eff.dirs()[0].access, Access::ReadOnly);
    let canon = std::fs::canonicalize(ws.path()).unwrap();
    assert!(eff.check_path(&canon.join("f"), Access::ReadOnly).is_ok());
    assert!(eff.check_path(&canon.join("f"), Access::ReadWrite).is_err());
    // No grant at all: nothing is preopened.
    let (none, _) =
        EffectiveCapabilities::new("p", &req, &Capabilities::default(), Some(ws.path()));
    assert!(none.dirs().is_empty());
}

#[test]
fn configured_secrets_are_whatever_the_grant_names() {
    let req = Capabilities {
        secrets: vec![HostRule::CONFIGURED_SPELLING.into()],
        ..Capabilities::default()
    };
    assert!(req.validate().is_err(), "a grant must name its secrets");
    assert!(req.validate_with(true).is_ok());
    let grant = Capabilities {
        secrets: vec!["HOOK_TOKEN".into()],
        ..Capabilities::default()
    };
    let (eff, _) = EffectiveCapabilities::new("notify", &req, &grant, None);
    assert!(eff.check_secret("HOOK_TOKEN").is_ok());
    let d = eff.check_secret("OPENAI_API_KEY").unwrap_err();
    assert_eq!(
        d.hint,
        "grant it with [plugins.grants.notify] secrets = [\"OPENAI_API_KEY\"]"
    );
    let (none, _) = EffectiveCapabilities::new("notify", &req, &Capabilities::default(), None);
    assert!(
        none.check_secret("HOOK_TOKEN").is_err(),
        "nothing without a grant"
    );
}

#[test]
fn configured_hosts_defer_to_the_concrete_grant() {
    let req = caps_http(&[HostRule::CONFIGURED_SPELLING]);
    assert!(req.validate().is_err(), "not allowed in grants");
    assert!(req.validate_with(true).is_ok());
    let (eff, _) = EffectiveCapabilities::new("p", &req, &caps_http(&["127.0.0.1:8000"]), None);
    assert!(eff.check_http("127.0.0.1", 8000).is_ok());
    assert!(eff.check_http("127.0.0.1", 8001).is_err());
    let (none, _) = EffectiveCapabilities::new("p", &req, &Capabilities::default(), None);
    assert!(
        none.check_http("127.0.0.1", 8000).is_err(),
        "nothing without a grant"
    );
}

#[test]
fn exec_matches_by_program_name() {
    let c = Capabilities {
        exec: vec!["bash".into()],
        ..Default::default()
    };
    let (eff, _) = EffectiveCapabilities::new("p", &c, &c, None);
    assert!(eff.check_exec("bash").is_ok());
    assert!(eff.check_exec("/bin/bash").is_ok());
    assert!(eff.check_exec("sh").is_err());
}

#[test]
fn host_rule_keywords_parse_to_their_variants() {
    assert_eq!(HostRule::parse("<public>", false), Ok(HostRule::Public));
    assert_eq!(HostRule::parse("<public>", true), Ok(HostRule::Public));
    assert_eq!(
        HostRule::parse("<configured>", true),
        Ok(HostRule::Configured)
    );
    assert_eq!(
        HostRule::parse("<configured>", false),
        Err(CapabilityParseError::BadHost("<configured>".into())),
        "only provider and channel manifests may request <configured>"
    );
    // Keywords are exact: a near miss is a bad host, never a widening.
    assert!(HostRule::parse(" <public>", false).is_err());
    assert!(HostRule::parse("<PUBLIC>", false).is_err());
}

#[test]
fn host_rule_patterns_and_the_bare_star() {
    let rule = HostRule::parse("api.example.com:8443", false).unwrap();
    assert_eq!(
        rule,
        HostRule::Pattern(HostPattern::parse("api.example.com:8443").unwrap())
    );
    assert!(rule.matches("api.example.com", 8443));
    assert!(!rule.matches("api.example.com", 443));
    assert_eq!(
        HostRule::parse("*", true),
        Err(CapabilityParseError::BadHost("*".into()))
    );
    // The keywords never match by name.
    assert!(!HostRule::Public.matches("example.com", 443));
    assert!(!HostRule::Configured.matches("example.com", 443));
}

#[test]
fn host_rule_display_round_trips() {
    for raw in [
        "<public>",
        "<configured>",
        "api.example.com",
        "127.0.0.1:8080",
        "*.example.com",
        "*.example.com:8443",
        "[::1]:9000",
        "[::1]",
    ] {
        let rule = HostRule::parse(raw, true).unwrap();
        assert_eq!(rule.to_string(), raw);
        assert_eq!(HostRule::parse(&rule.to_string(), true).unwrap(), rule);
    }
    // Patterns print normalized, and the normal form parses back equal.
    let rule = HostRule::parse("https://API.Example.com/", false).unwrap();
    assert_eq!(rule.to_string(), "api.example.com");
    assert_eq!(HostRule::parse(&rule.to_string(), false).unwrap(), rule);
}

#[test]
fn capability_kinds_keep_their_wire_names() {
    let names: Vec<String> = [
        CapabilityKind::Filesystem,
        CapabilityKind::Http,
        CapabilityKind::Exec,
        CapabilityKind::Env,
        CapabilityKind::Secret,
        CapabilityKind::Model,
    ]
    .iter()
    .map(|k| {
        assert_eq!(k.to_string(), k.as_str());
        k.to_string()
    })
    .collect();
    assert_eq!(
        names,
        ["filesystem", "http", "exec", "env", "secret", "model"]
    );
}

#[test]
fn denials_carry_their_kind_and_key() {
    let c = Capabilities {
        secrets: vec!["tok".into()],
        ..Default::default()
    };
    let (eff, _) = EffectiveCapabilities::new("p", &c, &Capabilities::default(), None);
    let d = eff.check_secret("tok").unwrap_err();
    assert_eq!(d.capability, CapabilityKind::Secret);
    assert!(d.to_string().starts_with("secret denied for plugin \"p\""));
    assert!(d.hint.contains("[plugins.grants.p] secrets = [\"tok\"]"));
    assert_eq!(
        eff.check_http("a.com", 443).unwrap_err().capability,
        CapabilityKind::Http
    );
    assert_eq!(
        eff.check_exec("sh").unwrap_err().capability,
        CapabilityKind::Exec
    );
    assert_eq!(
        eff.check_env("HOME").unwrap_err().capability,
        CapabilityKind::Env
    );
    assert_eq!(
        eff.check_model().unwrap_err().capability,
        CapabilityKind::Model
    );
    let bad = Capabilities {
        env: vec!["A B".into()],
        ..Default::default()
    };
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "env name \"A B\" is invalid"
    );
}

/// The access decision for every combination of request and grant, as one
/// table: `(requested, granted, host, port, expected)`.
type HttpCase<'a> = (
    &'a [&'a str],
    &'a [&'a str],
    &'a str,
    u16,
    Option<HttpAccess>,
);

#[test]
fn check_http_decision_table() {
    use HttpAccess::{Granted, PublicOnly};
    // One row per line reads as a table; rustfmt would split the long rows.
    #[rustfmt::skip]
    let cases: &[HttpCase] = &[
        // Named on both sides.
        (&["a.com"], &["a.com"], "a.com", 443, Some(Granted)),
        (&["a.com"], &["a.com"], "b.com", 443, None),
        (&["a.com"], &[], "a.com", 443, None),
        (&[], &["a.com"], "a.com", 443, None),
        (&["*.a.com"], &["x.a.com"], "x.a.com", 443, Some(Granted)),
        (&["x.a.com"], &["*.a.com"], "y.a.com", 443, None),
        (&["a.com:8080"], &["a.com"], "a.com", 8080, Some(Granted)),
        (&["a.com:8080"], &["a.com"], "a.com", 443, None),
        // `<configured>` defers to the concrete grant.
        (&["<configured>"], &["a.com"], "a.com", 443, Some(Granted)),
        (&["<configured>"], &["a.com"], "b.com", 443, None),
        (&["<configured>"], &["<public>"], "a.com", 443, None),
        // A `<configured>` grant is meaningless (and rejected at load).
        (&["a.com"], &["<configured>"], "a.com", 443, None),
        // `<public>` needs both sides; a named grant still wins.
        (&["<public>"], &["<public>"], "a.com", 443, Some(PublicOnly)),
        (&["<public>"], &[], "a.com", 443, None),
        (&[], &["<public>"], "a.com", 443, None),
        (&["<public>", "a.com"], &["<public>", "a.com"], "a.com", 443, Some(Granted)),
        (&["<public>", "a.com"], &["<public>"], "a.com", 443, Some(PublicOnly)),
        (&["<public>"], &["<public>", "a.com"], "a.com", 443, Some(PublicOnly)),
        (&["<public>", "<configured>"], &["a.com"], "a.com", 443, Some(Granted)),
        (&["<public>", "<configured>"], &["<public>"], "b.com", 80, Some(PublicOnly)),
        // Malformed entries (never past validation) grant nothing.
        (&["*"], &["*"], "a.com", 443, None),
        (&[" <public>"], &["<public>"], "a.com", 443, None),
    ];
    for (req, grant, host, port, want) in cases {
        let (eff, _) = EffectiveCapabilities::new("p", &caps_http(req), &caps_http(grant), None);
        let got = eff.check_http(host, *port);
        match want {
            Some(access) => assert_eq!(
                got.as_ref().ok(),
                Some(access),
                "{req:?} / {grant:?} -> {host}:{port}: {got:?}"
            ),
            None => match got {
                Err(d) => {
                    assert_eq!(d.capability, CapabilityKind::Http);
                    assert_eq!(d.detail, format!("request to {host}:{port}"));
                }
                Ok(access) => {
                    panic!("{req:?} / {grant:?} -> {host}:{port}: {access:?}, want a denial")
                }
            },
        }
    }
}

#[test]
fn http_denial_hints_know_what_the_manifest_requests() {
    let (eff, _) = EffectiveCapabilities::new(
        "p",
        &caps_http(&["a.com:8080", "b.com", "<public>"]),
        &Capabilities::default(),
        None,
    );
    let port_named = eff.check_http("a.com", 8080).unwrap_err();
    assert!(
        port_named
            .hint
            .starts_with("grant it with [plugins.grants.p] http = [\"a.com:8080\"]")
    );
    // A bare host in the manifest covers both default ports.
    let plain = eff.check_http("b.com", 80).unwrap_err();
    assert!(plain.hint.starts_with("grant it with"), "{}", plain.hint);
    // `<public>` names no host, so the hint asks for the manifest entry too.
    let other = eff.check_http("c.com", 443).unwrap_err();
    assert!(other.hint.contains("manifest does not request it"));
}

#[test]
fn a_request_as_a_grant_drops_the_configured_placeholders() {
    let req: Capabilities = toml::from_str(
        r#"
http = ["<public>", "<configured>", "api.example.com"]
exec = ["bash"]
secrets = ["<configured>", "TOKEN"]
"#,
    )
    .unwrap();
    let g = req.grantable();
    assert_eq!(g.http, ["<public>", "api.example.com"]);
    assert_eq!(
        g.secrets
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["TOKEN"]
    );
    assert_eq!(g.exec, ["bash"]);
    g.validate().expect("a valid grant");
    assert!(req.validate().is_err(), "the request itself is not a grant");
}
