//! `web_fetch` / `web_search` through the real runtime: the SSRF guard on
//! literal addresses, on names (via a resolver override that routes a "public"
//! name to a loopback listener) and on every redirect hop; the session model
//! answering the question; the SearxNG backend.

mod common;

use common::*;
use serde_json::json;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnstone_runtime::netguard::{NetworkPolicy, Resolve, Resolved};
use turnstone_runtime::{
    LoadedPlugin, ModelAccess, PluginSettings, PluginSource, Runtime, ToolOutputSink,
};

/// A loopback web server: `/page` is HTML, `/to/<url>` redirects to `<url>`,
/// `/search` is SearxNG JSON.
async fn web_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, extra, ctype, body) = if path == "/page" {
                    (200, String::new(), "text/html", "<html><head><title>T</title></head><body><h1>Facts</h1><p>The answer is <b>42</b>.</p><script>var x=1;</script></body></html>".to_string())
                } else if let Some(target) = path.strip_prefix("/to/") {
                    (
                        302,
                        format!("location: {target}\r\n"),
                        "text/plain",
                        String::new(),
                    )
                } else if path.starts_with("/search?") {
                    let q = path.contains("q=rust+wasm")
                        && path.contains("format=json")
                        && path.contains("categories=it");
                    (200, String::new(), "application/json", json!({"results": [
                        {"title": "Rust and WebAssembly", "url": "https://rustwasm.example/", "content": "Book"},
                        {"title": if q { "second" } else { "WRONG QUERY" }, "url": "https://b.example/", "content": ""},
                        {"title": "third", "url": "https://c.example/", "content": ""}]}).to_string())
                } else {
                    (404, String::new(), "text/plain", "nope".to_string())
                };
                let resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    port
}

/// `public.test` "resolves" to a public address but is served on loopback.
struct TestResolver(u16);

impl Resolve for TestResolver {
    fn resolve(
        &self,
        host: &str,
        _port: u16,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<Resolved>>> {
        let out = match host {
            "public.test" => vec![Resolved {
                screened: "93.184.216.34".parse::<IpAddr>().unwrap(),
                connect: SocketAddr::from(([127, 0, 0, 1], self.0)),
            }],
            "sneaky.test" => vec![
                Resolved {
                    screened: "93.184.216.34".parse().unwrap(),
                    connect: SocketAddr::from(([127, 0, 0, 1], self.0)),
                },
                Resolved {
                    screened: "10.1.2.3".parse().unwrap(),
                    connect: SocketAddr::from(([127, 0, 0, 1], self.0)),
                },
            ],
            _ => Vec::new(),
        };
        Box::pin(async move { Ok(out) })
    }
}

async fn web_plugin(
    rt: &Runtime,
    port: u16,
    allow_private: bool,
    searxng: Option<String>,
) -> LoadedPlugin {
    let mut config = std::collections::BTreeMap::new();
    let mut grant = None;
    if let Some(url) = searxng {
        config.insert("searxng_url".to_string(), url);
        grant = common::grant(&format!(
            "http = [\"<public>\", \"127.0.0.1:{port}\"]\nmodel = true"
        ));
    }
    rt.load(
        PluginSource {
            dir: staged("components", "web"),
            builtin: true,
        },
        PluginSettings {
            grant,
            config,
            network: NetworkPolicy {
                allow_private_network: allow_private,
                resolver: Arc::new(TestResolver(port)),
                ..NetworkPolicy::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// A tool sink lending a fake session model that records its prompt.
#[derive(Default)]
struct WithModel(Arc<Mutex<Vec<String>>>);

impl ModelAccess for WithModel {
    fn complete(
        &self,
        system: String,
        prompt: String,
        _max: u32,
    ) -> futures::future::BoxFuture<'static, Result<String, String>> {
        self.0
            .lock()
            .unwrap()
            .push(format!("{system}\n---\n{prompt}"));
        Box::pin(async { Ok("The page says the answer is 42.".to_string()) })
    }
}

impl ToolOutputSink for WithModel {
    fn chunk(&self, _text: &str) -> bool {
        true
    }
    fn model(&self) -> Option<Arc<dyn ModelAccess>> {
        Some(Arc::new(WithModel(self.0.clone())))
    }
}

async fn fetch(p: &LoadedPlugin, url: &str) -> (String, bool) {
    let (_t, ws) = workspace();
    let r = p
        .execute(
            "web_fetch",
            &json!({"url": url, "question": "What is the answer?"}).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    (r.output, r.is_error)
}

#[tokio::test]
async fn web_fetch_is_ssrf_guarded_on_every_hop() {
    let rt = runtime();
    let port = web_server().await;
    let p = web_plugin(&rt, port, false, None).await;

    // A public name (routed to loopback by the test resolver) works; without a
    // model attached the readable page text comes back.
    let (out, err) = fetch(&p, &format!("http://public.test:{port}/page")).await;
    assert!(!err, "{out}");
    assert!(
        out.contains("The answer is **42**") || out.contains("The answer is 42"),
        "{out}"
    );
    assert!(
        !out.contains("<p>") && !out.contains("var x"),
        "HTML is reduced to text: {out}"
    );

    // Literal private, metadata and IPv4-in-IPv6 addresses are refused.
    for url in [
        format!("http://127.0.0.1:{port}/page"),
        "http://10.0.0.1/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        format!("http://[::ffff:127.0.0.1]:{port}/page"),
        format!("http://sneaky.test:{port}/page"),
        // Teredo (client 127.0.0.1), NAT64 local-use, 6to4, Azure wire server.
        format!("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{port}/page"),
        format!("http://[64:ff9b:1::7f00:1]:{port}/page"),
        format!("http://[2002:7f00:1::]:{port}/page"),
        "http://168.63.129.16/machine".to_string(),
        "http://[2001:2::1]/".to_string(),
    ] {
        let (out, err) = fetch(&p, &url).await;
        assert!(err && out.contains("SSRF guard"), "{url}: {out}");
        assert!(!out.contains("answer is"), "{url}: {out}");
    }
    // A public name redirecting to a private address: the second hop is refused.
    let (out, err) = fetch(
        &p,
        &format!("http://public.test:{port}/to/http://127.0.0.1:{port}/page"),
    )
    .await;
    assert!(
        err && out.contains("SSRF guard") && !out.contains("answer is"),
        "{out}"
    );
    let (out, err) = fetch(
        &p,
        &format!("http://public.test:{port}/to/http://169.254.169.254/"),
    )
    .await;
    assert!(err && out.contains("cloud metadata"), "{out}");
    // Public → public redirects are followed.
    let (out, err) = fetch(
        &p,
        &format!("http://public.test:{port}/to/http://public.test:{port}/page"),
    )
    .await;
    assert!(!err && out.contains("answer is"), "{out}");
    // Non-http schemes are refused before anything is sent.
    let (_t, ws) = workspace();
    let refused = p
        .prepare(
            "web_fetch",
            &json!({"url": "file:///etc/passwd", "question": "q"}).to_string(),
            &ctx(&ws),
        )
        .await
        .unwrap()
        .unwrap_err();
    assert!(refused.contains("only http"), "{refused}");
    // No host, or an IPv6 zone id: a clear refusal, never a lookup.
    for (url, why) in [
        ("http:///nohost", "has no host"),
        ("http://[fd00::1%eth0]/", "zone id"),
    ] {
        let (out, err) = fetch(&p, url).await;
        assert!(err && out.contains(why), "{url}: {out}");
        assert!(
            out.starts_with("Error: ") && !out.contains("Error: Error:"),
            "{out}"
        );
    }
}

#[tokio::test]
async fn allow_private_network_opens_private_but_never_metadata() {
    let rt = runtime();
    let port = web_server().await;
    let p = web_plugin(&rt, port, true, None).await;
    let (out, err) = fetch(&p, &format!("http://127.0.0.1:{port}/page")).await;
    assert!(!err && out.contains("answer is"), "{out}");
    let (out, err) = fetch(&p, "http://169.254.169.254/latest/").await;
    assert!(err && out.contains("cloud metadata"), "{out}");
    // The opt-in opens private networks only: link-local, multicast,
    // unspecified and reserved ranges stay closed.
    for url in [
        "http://169.254.170.2/v2/credentials",
        "http://169.254.1.1/",
        "http://[fe80::1]/",
        "http://[fd00:ec2::23]/",
        "http://192.0.0.192/",
        "http://224.0.0.1/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://240.0.0.1/",
        "http://255.255.255.255/",
        "http://[100::1]/",
    ] {
        let (out, err) = fetch(&p, url).await;
        assert!(err && out.contains("SSRF guard"), "{url}: {out}");
        assert!(!out.contains("answer is"), "{url}: {out}");
    }
}

#[tokio::test]
async fn web_fetch_asks_the_session_model_the_question() {
    let rt = runtime();
    let port = web_server().await;
    let p = web_plugin(&rt, port, false, None).await;
    let (_t, ws) = workspace();
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let r = p
        .execute(
            "web_fetch",
            &json!({"url": format!("http://public.test:{port}/page"), "question": "What is the answer?"}).to_string(),
            &ctx(&ws),
            Arc::new(WithModel(prompts.clone())),
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(
        r.output,
        format!("Source: http://public.test:{port}/page\n\nThe page says the answer is 42.")
    );
    let seen = prompts.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].contains("42") && seen[0].contains("Question: What is the answer?"),
        "{}",
        seen[0]
    );
}

#[tokio::test]
async fn web_search_uses_searxng_and_says_when_unconfigured() {
    let rt = runtime();
    let port = web_server().await;
    let (_t, ws) = workspace();
    let bare = web_plugin(&rt, port, false, None).await;
    let r = bare
        .execute(
            "web_search",
            &json!({"query": "x"}).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(
        r.is_error && r.output.contains("searxng_url"),
        "{}",
        r.output
    );

    let p = web_plugin(&rt, port, false, Some(format!("http://127.0.0.1:{port}"))).await;
    let r = p
        .execute(
            "web_search",
            &json!({"query": "rust wasm", "max_results": 2, "category": "it"}).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(
        r.output,
        "1. Rust and WebAssembly\n   https://rustwasm.example/\n   Book\n2. second\n   https://b.example/\n"
    );
    let bad = p
        .prepare(
            "web_search",
            &json!({"query": "q", "max_results": 21}).to_string(),
            &ctx(&ws),
        )
        .await
        .unwrap()
        .unwrap_err();
    assert!(bad.contains("between 1 and 20"), "{bad}");
}
