//! Test-only component: each tool probes one boundary of the sandbox.

use turnstone_plugin_sdk::http::Request;
use turnstone_plugin_sdk::prelude::*;
use turnstone_plugin_sdk::process::{Command, ExitStatus};

#[derive(Deserialize, JsonSchema)]
pub struct Empty {}

#[derive(Deserialize, JsonSchema)]
pub struct Echo {
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Mb {
    pub mb: u64,
}

#[derive(Deserialize, JsonSchema)]
pub struct PathArg {
    pub path: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct WriteArg {
    pub path: String,
    pub content: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct UrlArg {
    pub url: String,
    /// Secret to send as a bearer token.
    pub secret: Option<String>,
    /// Put the secret's reference in this header instead (as is, no
    /// `Bearer `), to probe the host's header binding.
    pub header: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ExecArg {
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

#[derive(Deserialize, JsonSchema)]
pub struct Ms {
    pub ms: u64,
}

macro_rules! tool {
    ($ty:ident, $name:literal, $args:ty, |$a:ident, $c:ident| $body:expr) => {
        pub struct $ty;
        impl Tool for $ty {
            type Args = $args;
            const NAME: &'static str = $name;
            const DESCRIPTION: &'static str = $name;
            fn execute($a: $args, $c: &Context) -> Result<Output, ToolError> {
                $body
            }
        }
    };
}

tool!(EchoTool, "echo", Echo, |a, _c| Ok(a.text.into()));

tool!(Spin, "spin", Empty, |_a, _c| {
    let mut x: u64 = 0;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
});

tool!(Hog, "hog", Mb, |a, _c| {
    let mut blocks = Vec::new();
    for _ in 0..a.mb {
        blocks.push(std::hint::black_box(vec![1u8; 1 << 20]));
    }
    Ok(format!("allocated {} MiB", blocks.len()).into())
});

tool!(Panic, "panic", Empty, |_a, _c| panic!(
    "deliberate test panic"
));

tool!(ReadPath, "read", PathArg, |a, _c| {
    Ok(std::fs::read_to_string(&a.path)?.into())
});

tool!(WritePath, "write", WriteArg, |a, _c| {
    std::fs::write(&a.path, a.content)?;
    Ok("written".into())
});

tool!(Fetch, "fetch", UrlArg, |a, c| {
    let mut req = Request::get(&a.url);
    match (&a.secret, &a.header) {
        (Some(s), Some(h)) => {
            let token = turnstone_plugin_sdk::host::secret_ref(s)
                .map_err(turnstone_plugin_sdk::http::HttpError::Denied)?;
            req = req.header(h, token);
        }
        (Some(s), None) => req = req.bearer_secret(s)?,
        (None, _) => {}
    }
    let mut resp = req.send()?;
    let mut n = 0;
    let mut body = String::new();
    while let Some(chunk) = resp.next_chunk()? {
        let text = String::from_utf8_lossy(&chunk).into_owned();
        c.emit(&text);
        body.push_str(&text);
        n += 1;
    }
    Ok(format!("status={} chunks={n} body={body}", resp.status).into())
});

tool!(Exec, "exec", ExecArg, |a, c| {
    let mut cmd = Command::new(&a.program);
    for arg in a.args {
        cmd = cmd.arg(arg);
    }
    for (k, v) in a.env {
        cmd = cmd.env(k, v);
    }
    let child = cmd.spawn()?;
    let mut out = String::new();
    while let Some(chunk) = child.next_chunk() {
        let text = String::from_utf8_lossy(&chunk.data).into_owned();
        c.emit(&text);
        out.push_str(&text);
    }
    let code = match child.wait() {
        ExitStatus::Exited(c) => c,
        ExitStatus::Signaled(s) => -s,
    };
    Ok(format!("exit={code} out={out}").into())
});

tool!(Sleep, "sleep", Ms, |a, _c| {
    let done = turnstone_plugin_sdk::host::sleep_ms(a.ms);
    Ok(format!("slept={done}").into())
});

tool!(Env, "env", Empty, |_a, _c| {
    let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    Ok(format!("vars={}", vars.join(",")).into())
});

tool!(Kv, "kv", Echo, |a, _c| {
    let prev = turnstone_plugin_sdk::host::kv_get("k")
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_default();
    turnstone_plugin_sdk::host::kv_set("k", a.text.as_bytes())?;
    Ok(format!("prev={prev}").into())
});

/// A GET straight through `wasi:http`, bypassing the SDK's pre-check, so only the
/// host's send hook stands between the guest and the network.
fn raw_get(authority: &str) -> Result<String, String> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, OutgoingBody, OutgoingRequest, Scheme};
    let req = OutgoingRequest::new(Fields::new());
    req.set_scheme(Some(&Scheme::Http)).map_err(|_| "scheme")?;
    req.set_authority(Some(authority))
        .map_err(|_| "authority")?;
    req.set_path_with_query(Some("/")).map_err(|_| "path")?;
    let body = req.body().map_err(|_| "body")?;
    let pending = outgoing_handler::handle(req, None).map_err(|e| format!("{e:?}"))?;
    OutgoingBody::finish(body, None).map_err(|e| format!("{e:?}"))?;
    pending.subscribe().block();
    match pending.get() {
        Some(Ok(Ok(resp))) => Ok(format!("status {}", resp.status())),
        Some(Ok(Err(e))) => Err(format!("{e:?}")),
        _ => Err("no response".into()),
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct Authority {
    pub authority: String,
}

tool!(RawFetch, "raw_fetch", Authority, |a, _c| {
    raw_get(&a.authority)
        .map(Output::from)
        .map_err(ToolError::new)
});

register_tools!(
    RawFetch, EchoTool, Spin, Hog, Panic, ReadPath, WritePath, Fetch, Exec, Sleep, Env, Kv
);
