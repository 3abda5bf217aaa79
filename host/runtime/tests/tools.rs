//! Loading, describing and calling the example tool and read_file through the
//! real runtime.

mod common;

use common::*;
use serde_json::json;
use turnstone_runtime::{PluginKind, PluginSettings};

#[tokio::test]
async fn word_count_describes_its_rust_type_and_counts() {
    let rt = runtime();
    let p = load(
        &rt,
        "example-plugins",
        "word_count",
        PluginSettings::default(),
    )
    .await;
    assert_eq!(p.manifest.plugin.kind, PluginKind::Tool);
    assert_eq!(p.tools.len(), 1);
    let t = &p.tools[0];
    assert_eq!(t.name, "word_count");
    assert!(t.auto_approve && t.task_agent);
    assert_eq!(t.primary_key.as_deref(), Some("text"));
    // The schema mirrors `WordCountArgs { text: Option<String>, path: Option<String>, #[serde(default)] top: u32 }`.
    let s = &t.parameters;
    assert_eq!(s["type"], "object");
    let props = s["properties"].as_object().unwrap();
    let mut names: Vec<&String> = props.keys().collect();
    names.sort();
    assert_eq!(names, ["path", "text", "top"]);
    assert_eq!(s["properties"]["text"]["type"], json!(["string", "null"]));
    assert_eq!(s["properties"]["top"]["type"], "integer");
    assert_eq!(s["properties"]["top"]["minimum"], 0);
    assert_eq!(
        s["properties"]["path"]["description"],
        "File to count (relative to the working directory)."
    );
    assert!(
        s.get("required")
            .is_none_or(|r| r.as_array().unwrap().is_empty())
    );

    let (_t, ws) = workspace();
    let out = p
        .execute(
            "word_count",
            r#"{"text":"the cat the hat\nend","top":1}"#,
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.output);
    assert_eq!(out.output, "lines: 2\nwords: 5\nchars: 19\n2\tthe");

    // Preview and argument validation happen before approval.
    let preview = p
        .prepare("word_count", r#"{"path":"a.txt"}"#, &ctx(&ws))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(preview.header, "word_count: a.txt");
    assert!(!preview.needs_approval);
    let refused = p
        .prepare("word_count", "{}", &ctx(&ws))
        .await
        .unwrap()
        .unwrap_err();
    assert!(refused.contains("exactly one"), "{refused}");
    let malformed = p
        .prepare("word_count", r#"{"top":"many"}"#, &ctx(&ws))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        malformed.starts_with("Error: invalid arguments for word_count"),
        "{malformed}"
    );
    let bad = p
        .execute("word_count", "not json", &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(
        bad.is_error && bad.output.contains("invalid arguments"),
        "{}",
        bad.output
    );
    let unknown = p
        .execute("nope", "{}", &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(unknown.is_error && unknown.output.contains("no tool named"));
}

#[tokio::test]
async fn third_party_plugin_gets_no_files_until_granted() {
    let rt = runtime();
    let (_t, ws) = workspace();
    std::fs::write(ws.join("a.txt"), "one two three\n").unwrap();
    let settings = PluginSettings {
        workspace: Some(ws.clone()),
        ..Default::default()
    };
    let denied = load(&rt, "example-plugins", "word_count", settings.clone()).await;
    assert!(denied.ctx.caps.dirs().is_empty());
    let out = denied
        .execute("word_count", r#"{"path":"a.txt"}"#, &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(
        out.is_error,
        "read without a grant must fail: {}",
        out.output
    );
    assert!(
        out.output
            .contains("outside the directories granted to this plugin (granted: none)"),
        "{}",
        out.output
    );

    let granted = load(
        &rt,
        "example-plugins",
        "word_count",
        PluginSettings {
            grant: grant(r#"filesystem = [{ path = "workspace", access = "ro" }]"#),
            ..settings
        },
    )
    .await;
    let out = granted
        .execute("word_count", r#"{"path":"a.txt"}"#, &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.output);
    assert!(out.output.contains("words: 3"));
}

#[tokio::test]
async fn read_file_numbers_lines_and_pages() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.join("f.txt"), text).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("bin.dat"), [0u8, 1, 2, 3]).unwrap();
    let p = rt
        .load(
            source("components", "files", true),
            PluginSettings {
                workspace: Some(ws.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let spec = p.tool("read_file").unwrap();
    assert!(spec.auto_approve);
    assert_eq!(spec.primary_key.as_deref(), Some("path"));
    let c = ctx(&ws);
    let call = |args: &'static str| {
        let p = &p;
        let c = &c;
        async move { p.execute("read_file", args, c, sink(), None).await.unwrap() }
    };

    let all = call(r#"{"path":"f.txt"}"#).await;
    assert!(!all.is_error);
    assert!(
        all.output.starts_with("     1\tline 1\n     2\tline 2\n"),
        "{}",
        all.output
    );
    assert!(all.output.contains("    10\tline 10\n"));

    let page = call(r#"{"path":"f.txt","offset":3,"limit":2}"#).await;
    assert_eq!(
        page.output,
        "     3\tline 3\n     4\tline 4\n\n[showing lines 3-4 of 10; use offset/limit for more]\n"
    );

    let abs = p
        .execute(
            "read_file",
            &json!({"path": ws.join("f.txt"), "limit": 1}).to_string(),
            &c,
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(abs.output.starts_with("     1\tline 1\n"));

    for (args, needle) in [
        (r#"{"path":"missing.txt"}"#, "file not found"),
        (r#"{"path":"sub"}"#, "is a directory"),
        (r#"{"path":"bin.dat"}"#, "binary file"),
        (r#"{"path":"f.txt","offset":50}"#, "past the end"),
        (
            r#"{"path":"/etc/passwd"}"#,
            "outside the directories granted to this plugin",
        ),
        (r#"{"offset":1}"#, "missing field `path`"),
    ] {
        let r = call(args).await;
        assert!(r.is_error, "{args} should fail");
        assert!(
            r.output.contains(needle),
            "{args}: {} should mention {needle}",
            r.output
        );
    }
}
