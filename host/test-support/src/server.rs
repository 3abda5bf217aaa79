//! A harness for the real `turnstone serve` binary: a scripted LLM on
//! loopback, a scratch workspace and SQLite (or PostgreSQL) database, a free
//! port, an administrator, API tokens, HTTP helpers and an SSE reader that
//! parses frames the way a client does.
//!
//! The binary is `$TURNSTONE_TEST_BIN`, else `turnstone` in the cargo target
//! directory of the running test (`target/debug/turnstone` for
//! `target/debug/deps/<test>`): the `turnstone` package's integration tests
//! build it before they run.

use futures::StreamExt;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::sync::mpsc;
use turnstone_scripted_llm::{ScriptedLlm, Step};

use crate::target;

/// JWT secret used by every test server.
pub const SECRET: &str = "integration-test-secret-0123456789abcdef";

/// The `turnstone` binary under test.
pub fn turnstone_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TURNSTONE_TEST_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test's own path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("turnstone"))
        .expect("a test binary lives in <target>/<profile>/deps");
    assert!(
        bin.is_file(),
        "{} is missing: build it (`cargo build -p turnstone`) or set TURNSTONE_TEST_BIN",
        bin.display()
    );
    bin
}

/// `turnstone` with the staged built-in components and the shared cache.
pub fn turnstone_command() -> Command {
    let mut cmd = Command::new(turnstone_bin());
    cmd.arg("--builtin-dir")
        .arg(target().join("components"))
        .arg("--cache-dir")
        .arg(target().join("test-cache/cli"))
        .env_remove("TURNSTONE_BUILTIN_PLUGINS");
    cmd
}

/// Compiles every component into the shared cache once.
pub fn warm_component_cache() {
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "").unwrap();
        let out = turnstone_command()
            .arg("--config")
            .arg(dir.path().join("config.toml"))
            .args(["plugins", "list"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// Where a test server keeps its data.
#[derive(Debug, Clone, Default)]
pub struct StartOpts {
    /// PostgreSQL URL instead of the scratch SQLite file.
    pub pg_url: Option<String>,
    /// Extra environment of the server process (e.g. plugin secrets).
    pub env: Vec<(String, String)>,
    /// The SQLite file instead of `t.db` in the scratch directory.
    pub db_path: Option<std::path::PathBuf>,
}

/// A running server process.
pub struct Server {
    /// The scripted model it talks to.
    pub llm: ScriptedLlm,
    /// Its PostgreSQL database, when not SQLite.
    pub pg_url: Option<String>,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Scratch directory: `config.toml`, `ws/` (the workspace), `t.db`.
    pub dir: tempfile::TempDir,
    /// A client for requests to it.
    pub http: reqwest::Client,
    child: Child,
    /// Everything it printed on stderr so far.
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One parsed SSE frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Its `id:` line.
    pub id: Option<String>,
    /// Its `data:` JSON.
    pub data: Value,
}

impl Frame {
    /// The event's `type`.
    pub fn kind(&self) -> &str {
        self.data["type"].as_str().unwrap_or("")
    }
}

impl Server {
    /// Starts `turnstone serve` with `config` (TOML appended to the base config).
    pub async fn start(script: Vec<Step>, config: &str, args: &[&str]) -> Self {
        Self::start_with(script, config, args, StartOpts::default()).await
    }

    /// [`Server::start`] with storage options.
    pub async fn start_with(
        script: Vec<Step>,
        config: &str,
        args: &[&str],
        opts: StartOpts,
    ) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        warm_component_cache();
        let llm = ScriptedLlm::start(script).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            // Titles would add a model call after every first exchange; the
            // tests that want them say so with their own `[titles]`.
            format!(
                "[auth]\njwt_secret = \"{SECRET}\"\n{}{config}\n",
                if config.contains("[titles]") {
                    ""
                } else {
                    "[titles]\nenabled = false\n"
                }
            ),
        )
        .unwrap();
        let mut cmd = turnstone_command();
        cmd.arg("--config")
            .arg(dir.path().join("config.toml"))
            .arg("--workspace")
            .arg(dir.path().join("ws"));
        match &opts.pg_url {
            Some(url) => cmd
                .env("TURNSTONE_DB_BACKEND", "postgresql")
                .env("TURNSTONE_DB_URL", url),
            None => cmd.arg("--db").arg(
                opts.db_path
                    .clone()
                    .unwrap_or_else(|| dir.path().join("t.db")),
            ),
        };
        cmd.args(["--base-url", &llm.base_url(), "--model", "scripted-model"])
            .args(["--api-key", "sk-test"])
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .args(args)
            .envs(opts.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env_remove("TURNSTONE_JWT_SECRET")
            .env_remove("TURNSTONE_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let keep = lines.clone();
        // `TURNSTONE_TEST_ECHO_STDERR=1` also prints the server's log as it
        // comes (with `TURNSTONE_LOG`, to see where a turn's time goes).
        let echo = std::env::var_os("TURNSTONE_TEST_ECHO_STDERR").is_some();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if echo {
                    eprintln!("[server] {line}");
                }
                if let Some(addr) = line
                    .split("serving http://")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    && let Some(t) = tx.take()
                {
                    let _ = t.send(addr.to_string());
                }
                keep.lock().unwrap().push(line);
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(a) => a,
            Err(_) => panic!("server did not start: {:?}", lines.lock().unwrap()),
        };
        Self {
            llm,
            pg_url: opts.pg_url,
            base: format!("http://{addr}"),
            dir,
            http: reqwest::Client::new(),
            child,
            stderr: lines,
        }
    }

    /// `turnstone` on this server's database (for offline subcommands).
    pub fn db_command(&self) -> Command {
        let mut cmd = turnstone_command();
        match &self.pg_url {
            Some(url) => {
                cmd.env("TURNSTONE_DB_BACKEND", "postgresql")
                    .env("TURNSTONE_DB_URL", url);
            }
            None => {
                cmd.arg("--db").arg(self.dir.path().join("t.db"));
            }
        }
        cmd.env_remove("TURNSTONE_CONFIG")
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .arg("--config")
            .arg(self.dir.path().join("config.toml"));
        cmd
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit (after a signal).
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with `token` as bearer; returns (status, JSON body).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(m, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, v)
    }

    /// The `/metrics` text (public: no token).
    pub async fn metrics(&self) -> String {
        let resp = self.http.get(self.url("/metrics")).send().await.unwrap();
        resp.text().await.unwrap()
    }

    /// Raw body POST (for malformed JSON).
    pub async fn post_raw(&self, path: &str, token: &str, body: &str) -> (u16, Value) {
        let resp = self
            .http
            .post(self.url(path))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Creates the first admin; returns its JWT.
    pub async fn setup_admin(&self) -> String {
        let (s, v) = self
            .call(
                "POST",
                "/v1/api/auth/setup",
                None,
                Some(json!({"username": "admin", "display_name": "Admin", "password": "correct-horse"})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v["jwt"].as_str().unwrap().to_string()
    }

    /// Logs in as the administrator [`Server::setup_admin`] created (on any
    /// node sharing its database); returns the JWT.
    pub async fn login_admin(&self) -> String {
        let (s, v) = self
            .call(
                "POST",
                "/v1/api/auth/login",
                None,
                Some(json!({"username": "admin", "password": "correct-horse"})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v["jwt"].as_str().unwrap().to_string()
    }

    /// Polls `GET /v1/api/admin/plugins/{name}` until `pred` holds (a 404
    /// counts as not yet: a node sees a new plugin at its next poll); panics
    /// with the last answer and the server log after `secs`.
    pub async fn wait_plugin(
        &self,
        token: &str,
        name: &str,
        secs: u64,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let (s, v) = self
                .call(
                    "GET",
                    &format!("/v1/api/admin/plugins/{name}"),
                    Some(token),
                    None,
                )
                .await;
            if s == 200 && pred(&v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "plugin {name} never got there: {s} {v}\nserver log: {:#?}",
                self.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Creates a user with `role` offline and logs in; returns its JWT.
    pub async fn user(&self, name: &str, role: &str) -> String {
        let out = self
            .db_command()
            .args([
                "admin",
                "create-user",
                name,
                "--role",
                role,
                "--password-stdin",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(b"long-password\n")?;
                c.wait_with_output()
            })
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (s, v) = self
            .call(
                "POST",
                "/v1/api/auth/login",
                None,
                Some(json!({"username": name, "password": "long-password"})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v["jwt"].as_str().unwrap().to_string()
    }

    /// Issues an API token offline (`turnstone admin create-token`); returns it.
    pub fn token(&self, user: &str, scopes: &str) -> String {
        let out = self
            .db_command()
            .args(["admin", "create-token", "--user", user, "--scopes", scopes])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .find(|w| w.starts_with("ts_"))
            .unwrap()
            .to_string()
    }

    /// Sends `message` on workstream `ws` and waits for the turn to end;
    /// returns the stream with every frame of the turn.
    pub async fn send_and_finish(&self, token: &str, ws: &str, message: &str) -> Events {
        let mut events = self.send_streaming(token, ws, message).await;
        events.turn_end().await;
        events
    }

    /// Opens workstream `ws`'s event stream, then sends `message` on it;
    /// returns the stream while the turn runs.
    pub async fn send_streaming(&self, token: &str, ws: &str, message: &str) -> Events {
        let events = self
            .events(&format!("/v1/api/workstreams/{ws}/events"), token, None)
            .await;
        let (s, v) = self
            .call(
                "POST",
                &format!("/v1/api/workstreams/{ws}/send"),
                Some(token),
                Some(json!({"message": message})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        events
    }

    /// Creates a workstream; returns its id.
    pub async fn create(&self, token: &str, body: Value) -> String {
        let (s, v) = self
            .call("POST", "/v1/api/workstreams/new", Some(token), Some(body))
            .await;
        assert_eq!(s, 200, "{v}");
        v["ws_id"].as_str().unwrap().to_string()
    }

    /// Opens an SSE stream; frames arrive on the returned receiver.
    pub async fn events(&self, path: &str, token: &str, last_event_id: Option<&str>) -> Events {
        let mut req = self.http.get(self.url(path)).bearer_auth(token);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let (ctx, crx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut body = resp.bytes_stream();
            let mut buf = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let block: String = buf.drain(..end + 2).collect();
                    let mut id = None;
                    let mut data = None;
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("id: ") {
                            id = Some(v.to_string());
                        } else if let Some(v) = line.strip_prefix("data: ") {
                            data = Some(v.to_string());
                        } else if line.starts_with(':') {
                            let _ = ctx.send(line.to_string());
                        }
                    }
                    if let Some(d) = data {
                        let v: Value = serde_json::from_str(&d)
                            .unwrap_or_else(|e| panic!("non-JSON data frame {d:?}: {e}"));
                        if tx.send(Frame { id, data: v }).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Events {
            rx,
            comments: crx,
            seen: Vec::new(),
        }
    }
}

/// A live SSE stream.
pub struct Events {
    rx: mpsc::UnboundedReceiver<Frame>,
    /// `:` comment lines (pings).
    pub comments: mpsc::UnboundedReceiver<String>,
    /// Every frame received so far.
    pub seen: Vec<Frame>,
}

impl Events {
    /// Next frame (panics after `secs`).
    pub async fn next(&mut self, secs: u64) -> Frame {
        let f = tokio::time::timeout(Duration::from_secs(secs), self.rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no SSE frame within {secs}s; seen {:#?}", self.kinds()))
            .expect("stream ended");
        self.seen.push(f.clone());
        f
    }

    /// Next frame within `wait`, or `None` when none came or the stream ended.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Frame> {
        let f = tokio::time::timeout(wait, self.rx.recv()).await.ok()??;
        self.seen.push(f.clone());
        Some(f)
    }

    /// Reads until `pred` matches; returns the matching frame.
    pub async fn until(&mut self, secs: u64, pred: impl Fn(&Frame) -> bool) -> Frame {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let f = tokio::time::timeout(left, self.rx.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!("condition not met within {secs}s; seen {:#?}", self.kinds())
                })
                .expect("stream ended");
            self.seen.push(f.clone());
            if pred(&f) {
                return f;
            }
        }
    }

    /// Reads until the per-stream turn end (`ws_state`).
    pub async fn turn_end(&mut self) -> Frame {
        self.until(30, |f| f.kind() == "ws_state").await
    }

    /// Whether the stream ended (within `secs`).
    pub async fn ended(&mut self, secs: u64) -> bool {
        loop {
            match tokio::time::timeout(Duration::from_secs(secs), self.rx.recv()).await {
                Ok(None) => return true,
                Ok(Some(f)) => self.seen.push(f),
                Err(_) => return false,
            }
        }
    }

    /// Types seen so far.
    pub fn kinds(&self) -> Vec<String> {
        self.seen.iter().map(|f| f.kind().to_string()).collect()
    }

    /// Forgets what was seen.
    pub fn reset(&mut self) {
        self.seen.clear();
    }
}
