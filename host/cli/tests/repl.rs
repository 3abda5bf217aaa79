//! Drives the real `turnstone` REPL in a pseudo-terminal (and through piped
//! stdin) against the scripted LLM server on loopback, with the real built-in
//! components loaded from a shared compiled-component cache.

use expectrl::session::OsSession as Session;
use expectrl::{Eof, Expect};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use turnstone_scripted_llm::{ScriptedLlm, Step, openai};

mod support;
use support::{sse, target, warm_component_cache};

/// A scripted LLM on its own runtime, plus a scratch workspace and database.
struct Env {
    /// Runs the scripted LLM's tasks for the test's lifetime.
    _rt: tokio::runtime::Runtime,
    llm: ScriptedLlm,
    dir: tempfile::TempDir,
    /// Talk to the model as Anthropic's Messages API instead of OpenAI's.
    anthropic: bool,
}

impl Env {
    fn new(script: Vec<Step>) -> Self {
        warm_component_cache();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let llm = rt.block_on(ScriptedLlm::start(script)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("config.toml"), "").unwrap();
        Self {
            _rt: rt,
            llm,
            dir,
            anthropic: false,
        }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_turnstone"));
        c.arg("--builtin-dir")
            .arg(target().join("components"))
            .arg("--cache-dir")
            .arg(target().join("test-cache/cli"))
            .arg("--workspace")
            .arg(self.ws())
            .arg("--db")
            .arg(self.dir.path().join("t.db"))
            .arg("--config")
            .arg(self.dir.path().join("config.toml"))
            .args(if self.anthropic {
                [
                    "--base-url".to_string(),
                    self.llm.base_url(),
                    "--provider".into(),
                    "anthropic".into(),
                ]
            } else {
                [
                    "--base-url".to_string(),
                    format!("{}/v1", self.llm.base_url()),
                    "--provider".into(),
                    "openai".into(),
                ]
            })
            .args(["--model", "gpt-test", "--api-key", "sk-test"])
            .args(extra)
            .env("NO_COLOR", "1")
            .env("TERM", "xterm-256color")
            .env("HOME", self.dir.path())
            .env_remove("TURNSTONE_BUILTIN_PLUGINS")
            .env_remove("TURNSTONE_DB_URL")
            .env_remove("TURNSTONE_DB_BACKEND");
        c
    }

    /// The REPL in a pseudo-terminal, waiting at its first prompt.
    fn pty(&self, extra: &[&str]) -> Session {
        let mut p = Session::spawn(self.command(extra)).unwrap();
        p.set_expect_timeout(Some(Duration::from_secs(60)));
        p.expect("main › ").unwrap();
        p
    }

    /// Waits until the model has received `n` requests.
    fn wait_for_requests(&self, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.llm.requests().len() < n {
            assert!(std::time::Instant::now() < deadline, "no request {n}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Messages of the `n`-th request the model received.
    fn request(&self, n: usize) -> Vec<serde_json::Value> {
        let reqs = self.llm.requests();
        reqs[n].body["messages"].as_array().unwrap().clone()
    }
}

/// Types a line and presses Enter (raw mode: `\r`).
fn line(p: &mut Session, text: &str) {
    p.send(format!("{text}\r")).unwrap();
}

#[test]
fn a_plain_reply_streams_with_markdown_and_a_status_line() {
    let env = Env::new(vec![sse(openai::text(&[
        "# Result\n",
        "Hello, **wor",
        "ld**!\n- one\n",
    ]))]);
    let mut p = env.pty(&[]);
    line(&mut p, "hi there");
    // NO_COLOR: headings upper-cased, emphasis markers gone, bullets drawn.
    p.expect("RESULT").unwrap();
    p.expect("Hello, world!").unwrap();
    p.expect("• one").unwrap();
    p.expect("prompt + 3 completion tokens").unwrap();
    p.expect("main › ").unwrap();
    assert_eq!(env.request(0).last().unwrap()["content"], "hi there");
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
}

#[test]
fn approvals_yes_no_with_feedback_and_always() {
    let write = |id: &str, name: &str| {
        sse(openai::tool_call(
            id,
            "write_file",
            &[&format!("{{\"path\": \"{name}\", \"content\": \"x\\n\"}}")],
        ))
    };
    let env = Env::new(vec![
        write("c1", "a.txt"),
        sse(openai::text(&["wrote a"])),
        write("c2", "b.txt"),
        sse(openai::text(&["ok, not b"])),
        write("c3", "c.txt"),
        write("c4", "d.txt"),
        sse(openai::text(&["wrote c and d"])),
    ]);
    let mut p = env.pty(&[]);

    line(&mut p, "write a");
    // The heuristic judge's verdict and what the tool may touch, then the diff.
    p.expect("heuristic: low risk · approve").unwrap();
    p.expect("may touch: files rw ").unwrap();
    p.expect("+x").unwrap(); // the diff preview
    p.expect("approve [y/n/a] › ").unwrap();
    line(&mut p, "y");
    p.expect("✓ write_file").unwrap();
    // What the call touched, as the host recorded it.
    p.expect("↳ write ").unwrap();
    p.expect("wrote a").unwrap();
    assert!(env.ws().join("a.txt").exists());

    line(&mut p, "write b");
    p.expect("approve [y/n/a] › ").unwrap();
    line(&mut p, "n call it c.txt instead");
    p.expect("ok, not b").unwrap();
    assert!(!env.ws().join("b.txt").exists());
    let denied = env.request(3);
    let result = denied.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.contains("denied"), "{result}");
    assert!(result.contains("call it c.txt instead"), "{result}");

    line(&mut p, "write c and d");
    p.expect("approve [y/n/a] › ").unwrap();
    line(&mut p, "a");
    // The second write_file call runs without a prompt: no second approval card.
    let before = p.expect("wrote c and d").unwrap().before().to_vec();
    let text = String::from_utf8_lossy(&before);
    assert!(text.contains("✓ write_file"), "{text}");
    assert!(!text.contains("approve? y = yes"), "{text}");
    assert!(env.ws().join("c.txt").exists() && env.ws().join("d.txt").exists());
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
}

#[test]
fn ctrl_c_cancels_a_long_bash_and_the_session_goes_on() {
    let env = Env::new(vec![
        sse(openai::tool_call(
            "c1",
            "bash",
            &["{\"command\": \"echo started; sleep 30\"}"],
        )),
        sse(openai::text(&["still here"])),
    ]);
    let mut p = env.pty(&["--skip-permissions"]);
    line(&mut p, "run it");
    p.expect("started").unwrap();
    let t0 = std::time::Instant::now();
    p.send("\x03").unwrap();
    p.expect("cancelling").unwrap();
    p.expect("Cancelled.").unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "cancel took {:?}",
        t0.elapsed()
    );
    p.expect("main › ").unwrap();
    line(&mut p, "are you there?");
    p.expect("still here").unwrap();
    p.expect("completion tokens").unwrap();
    // The cancelled call was recorded for the model.
    let msgs = env.request(1);
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"].as_str().unwrap().contains("cancel"),
        "{tool}"
    );
    // Ctrl-C twice at an idle prompt exits.
    p.send("\x03").unwrap();
    p.expect("press Ctrl-C again").unwrap();
    p.send("\x03").unwrap();
    p.expect(Eof).unwrap();
}

#[test]
fn a_background_workstream_keeps_running_and_replays_when_foregrounded() {
    let env = Env::new(vec![
        Step::Delay(
            Duration::from_secs(3),
            Box::new(sse(openai::text(&["background answer\n"]))),
        ),
        sse(openai::text(&["side answer"])),
    ]);
    let mut p = env.pty(&[]);
    line(&mut p, "slow question");
    // The slow request must reach the model first so it takes the delayed step.
    env.wait_for_requests(1);
    line(&mut p, "/ws new side");
    p.expect("workstream 2 · side").unwrap();
    p.expect("side › ").unwrap();
    line(&mut p, "quick question");
    p.expect("side answer").unwrap();
    line(&mut p, "/ws list");
    p.expect("main").unwrap();
    // The background answer is buffered, not printed into this workstream…
    let before = p.expect("side › ").unwrap().before().to_vec();
    assert!(!String::from_utf8_lossy(&before).contains("background answer"));
    std::thread::sleep(Duration::from_secs(4));
    // …and replayed on switching back.
    line(&mut p, "/ws 1");
    p.expect("workstream 1 · main").unwrap();
    p.expect("background answer").unwrap();
    p.expect("main › ").unwrap();
    assert_eq!(env.request(0).last().unwrap()["content"], "slow question");
    assert_eq!(env.request(1).last().unwrap()["content"], "quick question");
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
}

#[test]
fn resume_by_alias_continues_the_saved_conversation() {
    let env = Env::new(vec![
        sse(openai::text(&["noted: the code is 4711"])),
        sse(openai::text(&["it was 4711"])),
    ]);
    // A second alias on the same server, chosen with /model and saved.
    std::fs::write(
        env.dir.path().join("config.toml"),
        format!(
            "[models.alt]\nbase_url = \"{}/v1\"\nmodel = \"alt-model\"\napi_key = \"k\"\n",
            env.llm.base_url()
        ),
    )
    .unwrap();
    let mut p = env.pty(&[]);
    line(&mut p, "remember the code 4711");
    p.expect("noted").unwrap();
    p.expect("completion tokens").unwrap();
    line(&mut p, "/name codes");
    p.expect("named codes").unwrap();
    line(&mut p, "/model alt");
    p.expect("this workstream now uses alt (alt-model)")
        .unwrap();
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();

    // A new process: /resume by alias brings the history back.
    let mut p = env.pty(&[]);
    line(&mut p, "/resume codes");
    p.expect("resumed codes").unwrap();
    p.expect("noted: the code is 4711").unwrap();
    p.expect("codes › ").unwrap();
    line(&mut p, "what was the code?");
    p.expect("it was 4711").unwrap();
    let msgs = env.request(1);
    let texts: Vec<&str> = msgs.iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(
        texts,
        [
            "remember the code 4711",
            "noted: the code is 4711",
            "what was the code?"
        ]
    );
    let reqs = env.llm.requests();
    assert_eq!(reqs[0].body["model"], "gpt-test");
    assert_eq!(
        reqs[1].body["model"], "alt-model",
        "the /model choice was resumed"
    );
    line(&mut p, "/history");
    p.expect("codes").unwrap();
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
}

#[test]
fn piped_stdin_sends_one_message_per_line_and_exits_at_eof() {
    use std::io::Write;
    let env = Env::new(vec![
        sse(openai::text(&["first **reply**"])),
        sse(openai::tool_call(
            "c1",
            "write_file",
            &["{\"path\": \"p.txt\", \"content\": \"piped\\n\"}"],
        )),
        sse(openai::text(&["second reply"])),
    ]);
    let mut child = env
        .command(&[])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The approval is answered by the next input line.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"one\nplease write\ny\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // Not a terminal: raw markdown passes through, no escape codes.
    assert!(stdout.contains("first **reply**"), "{stdout}");
    assert!(stdout.contains("second reply"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
    assert_eq!(
        std::fs::read_to_string(env.ws().join("p.txt")).unwrap(),
        "piped\n"
    );
    assert_eq!(env.llm.requests().len(), 3);
    // The banner (on stderr) names the model and the workspace.
    assert!(stderr.contains("model default (gpt-test"), "{stderr}");
    assert!(stderr.contains(&env.ws().display().to_string()), "{stderr}");
}

#[test]
fn a_failed_turn_in_piped_mode_reports_on_stderr_and_exits_non_zero() {
    let env = Env::new(vec![Step::Status {
        status: 401,
        headers: Vec::new(),
        body: r#"{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}"#
            .into(),
    }]);
    let out = env
        .command(&[])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"hello\n")?;
            c.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Incorrect API key provided"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty());
    assert_eq!(env.llm.requests().len(), 1, "auth errors are not retried");
}

#[test]
fn a_background_approval_rings_and_waits_for_the_user() {
    let env = Env::new(vec![
        Step::Delay(
            Duration::from_secs(2),
            Box::new(sse(openai::tool_call(
                "c1",
                "write_file",
                &["{\"path\": \"bg.txt\", \"content\": \"bg\\n\"}"],
            ))),
        ),
        sse(openai::text(&["side answer"])),
        sse(openai::text(&["bg done"])),
    ]);
    let mut p = env.pty(&[]);
    line(&mut p, "background task");
    env.wait_for_requests(1);
    line(&mut p, "/ws new side");
    p.expect("side › ").unwrap();
    line(&mut p, "quick");
    p.expect("side answer").unwrap();
    // The background workstream asks: a bell and a one-line notice, no card here.
    let before = p.expect("\x07").unwrap().before().to_vec();
    assert!(!String::from_utf8_lossy(&before).contains("approve? y = yes"));
    p.expect("workstream 1 (main) needs approval — /ws 1")
        .unwrap();
    assert!(
        !env.ws().join("bg.txt").exists(),
        "nothing runs before approval"
    );
    line(&mut p, "/ws 1");
    p.expect("approve? y = yes").unwrap();
    p.expect("main approve [y/n/a] › ").unwrap();
    line(&mut p, "y");
    p.expect("bg done").unwrap();
    assert_eq!(
        std::fs::read_to_string(env.ws().join("bg.txt")).unwrap(),
        "bg\n"
    );
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
}

#[test]
fn bad_start_up_input_fails_with_a_clear_message() {
    let env = Env::new(Vec::new());
    std::fs::write(
        env.dir.path().join("config.toml"),
        "[models.x]\nprovider = \"cohere\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let out = env
        .command(&[])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown provider \"cohere\""), "{err}");

    let env = Env::new(Vec::new());
    let out = env
        .command(&["--resume", "no-such-workstream"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-workstream"), "{err}");
}

#[test]
fn reasoning_is_shown_apart_from_the_answer() {
    let mut env = Env::new(vec![sse(
        turnstone_scripted_llm::anthropic::thinking_then_text(
            "Let me think\nabout it",
            "sig-1",
            &["The answer is 42."],
        ),
    )]);
    env.anthropic = true;
    let mut p = env.pty(&[]);
    line(&mut p, "question");
    // NO_COLOR marks reasoning lines instead of dimming them.
    p.expect("(thinking) Let me think").unwrap();
    p.expect("(thinking) about it").unwrap();
    p.expect("The answer is 42.").unwrap();
    let req = &env.llm.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
}

#[test]
fn slash_commands_edit_the_conversation_and_report() {
    let env = Env::new(vec![
        sse(openai::text(&["a1"])),
        sse(openai::text(&["a2"])),
        sse(openai::text(&["a1 again"])),
        sse(openai::text(&["fresh"])),
    ]);
    let mut p = env.pty(&[]);
    line(&mut p, "q1");
    p.expect("a1").unwrap();
    p.expect("completion tokens").unwrap();
    line(&mut p, "q2");
    p.expect("a2").unwrap();
    p.expect("completion tokens").unwrap();
    line(&mut p, "/rewind");
    p.expect("rewound 1 message(s); the earliest removed was: q2")
        .unwrap();
    line(&mut p, "/rewind 5");
    p.expect("cannot rewind 5 message(s): only 1 can be rewound")
        .unwrap();
    line(&mut p, "/retry");
    p.expect("a1 again").unwrap();
    p.expect("completion tokens").unwrap();
    let texts = |n: usize| -> Vec<String> {
        env.request(n)
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(texts(2), ["q1"], "retry re-asks q1 without the old answer");
    line(&mut p, "/clear");
    p.expect("context cleared").unwrap();
    line(&mut p, "q3");
    p.expect("fresh").unwrap();
    assert_eq!(texts(3), ["q3"]);
    line(&mut p, "/model");
    p.expect("* default").unwrap();
    line(&mut p, "/model nope");
    p.expect("error:").unwrap();
    line(&mut p, "/plugins");
    p.expect("files").unwrap();
    line(&mut p, "/mcp");
    p.expect("No MCP servers are configured").unwrap();
    line(&mut p, "/frobnicate");
    p.expect("unknown command /frobnicate").unwrap();
    line(&mut p, "/help");
    p.expect("/rewind [N]").unwrap();
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
}

/// A `review` skill in `<dir>/skills`, listed in the config.
fn with_review_skill(env: &Env) {
    let skills = env.dir.path().join("skills/review");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(
        skills.join("SKILL.md"),
        "---\nname: review\ndescription: Review a change\nallowed_tools: [read_file]\narguments:\n  - name: pr\n    required: true\n---\nReview PR {{pr}} closely.\n",
    )
    .unwrap();
    std::fs::write(
        env.dir.path().join("config.toml"),
        format!(
            "[skills]\ndirs = [\"{}\"]\n",
            env.dir.path().join("skills").display()
        ),
    )
    .unwrap();
}

fn piped(env: &Env, extra: &[&str], input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = env
        .command(extra)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn system_of(messages: &[serde_json::Value]) -> String {
    messages
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn skill_and_memory_commands_work_in_the_terminal() {
    let env = Env::new(vec![
        sse(openai::tool_call(
            "m1",
            "memory",
            &[
                r#"{"action": "save", "name": "style", "content": "terse answers", "description": "how to answer", "scope": "user"}"#,
            ],
        )),
        sse(openai::text(&["noted"])),
        sse(openai::text(&["reviewed"])),
    ]);
    with_review_skill(&env);
    let out = piped(
        &env,
        &[],
        "remember my style\n/memory\n/skill\n/skill nope\n/skill review 42\ngo\n/memory show style\n/memory forget style\n/memory\n",
    );
    let all = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{all}");
    // /memory lists what the tool saved; /skill lists and refuses an unknown one.
    assert!(
        all.contains("style") && all.contains("how to answer"),
        "{all}"
    );
    assert!(
        all.contains("review") && all.contains("(args: pr)"),
        "{all}"
    );
    assert!(all.contains("no skill named \"nope\""), "{all}");
    assert!(
        all.contains("skill review v1 is active (tools: read_file)"),
        "{all}"
    );
    assert!(
        all.contains("style · user · general"),
        "/memory show: {all}"
    );
    assert!(all.contains("forgot style (user memory)"), "{all}");
    assert!(all.contains("No memories yet."), "after forgetting: {all}");
    // The turn after /skill carries it, with only its tools.
    let reqs = env.llm.requests();
    assert_eq!(reqs.len(), 3);
    let system = system_of(&env.request(2));
    assert!(system.contains("Review PR 42 closely."), "{system}");
    let tools: Vec<&str> = reqs[2].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(tools, ["read_file"]);
}

#[test]
fn skill_flag_starts_with_a_skill_or_refuses_an_unknown_one() {
    let env = Env::new(vec![sse(openai::text(&["on it"]))]);
    with_review_skill(&env);
    let out = piped(&env, &["--skill", "nope"], "hello\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--skill: no skill named \"nope\""),
        "{stderr}"
    );
    assert!(env.llm.requests().is_empty());

    let out = piped(&env, &["--skill", "review pr=7"], "hello\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.wait_for_requests(1);
    assert!(system_of(&env.request(0)).contains("Review PR 7 closely."));
}
