//! The condition language, case by case: what holds, what does not, what
//! fails to parse (with where), what fails while evaluating.

use super::*;

fn poll(output: &str, exit_code: i64, prev: Option<&str>) -> Poll {
    Poll {
        output: output.into(),
        exit_code,
        prev_output: prev.map(str::to_string),
        polls: 3,
    }
}

fn holds(cond: &str, p: &Poll) -> Result<bool, String> {
    Condition::parse(cond)
        .map_err(|e| format!("parse: {e}"))?
        .holds(p)
        .map_err(|e| format!("eval: {e}"))
}

#[test]
fn the_references_examples_mean_what_they_meant() {
    let merged = poll(r#"{"state": "MERGED", "mergedAt": "2026-12-01"}"#, 0, None);
    let open = poll(r#"{"state": "OPEN", "mergedAt": null}"#, 0, None);
    let log = poll("build ok\nERROR: disk full\n", 1, Some("build ok\n"));
    let same = poll("waiting", 0, Some("waiting"));
    let ready = poll("Service READY", 0, Some("starting"));
    let cases: &[(&str, &Poll, bool)] = &[
        (r#"data["state"] == "MERGED""#, &merged, true),
        (r#"data["state"] == "MERGED""#, &open, false),
        (r#""error" in output"#, &log, false),
        (r#""ERROR" in output"#, &log, true),
        (r#""error" in output.lower()"#, &log, true),
        ("exit_code != 0", &log, true),
        ("exit_code != 0", &merged, false),
        (r#"changed and "ready" in output.lower()"#, &ready, true),
        (r#"changed and "ready" in output.lower()"#, &same, false),
        (r#"data.get("mergedAt") is not None"#, &merged, true),
        (r#"data.get("mergedAt") is not None"#, &open, false),
        // On output that is not JSON, data is None and .get answers None.
        (r#"data.get("mergedAt") is None"#, &log, true),
    ];
    for (cond, p, want) in cases {
        assert_eq!(holds(cond, p), Ok(*want), "{cond}");
    }
}

#[test]
fn operators_precedence_and_builtins() {
    let j = poll(
        r#"{"checks": [{"name": "ci", "ok": true}, {"name": "lint", "ok": false}], "count": 7, "tags": ["a", "b"]}"#,
        0,
        Some("old"),
    );
    let cases: &[(&str, bool)] = &[
        ("not exit_code", true),
        ("not not changed", true),
        ("exit_code == 0 and changed or False", true),
        ("False or exit_code == 0 and not changed", false),
        ("not exit_code == 1", true),
        ("data.count > 5 and data.count <= 7", true),
        ("data['count'] >= 8", false),
        ("data.count % 2 == 1", true),
        ("data.count * 2 - 4 == 10", true),
        ("-data.count < 0", true),
        ("(1 + 2) * 3 == 9", true),
        ("1 + 2 * 3 == 7", true),
        ("len(data.checks) == 2", true),
        ("all(c.ok for c in data.checks)", false),
        ("data.checks[0].ok and not data.checks[-1].ok", true),
        ("data.checks[1]['name'] == 'lint'", true),
        ("'a' in data.tags and 'z' not in data.tags", true),
        ("data.tags contains 'b'", true),
        ("'count' in data", true),
        ("any([c.ok for c in data.checks])", false),
        ("any([False, 0, '', data.count])", true),
        ("all([])", true),
        ("max(data.count, 3) == 7 and min([4, 2, 9]) == 2", true),
        ("sorted(data.tags) == ['a', 'b']", true),
        ("str(data.count) == '7' and int('12') == 12", true),
        ("float('1.5') + 1 == 2.5", true),
        ("abs(-3) == 3", true),
        ("bool('') == False", true),
        ("polls == 3", true),
        ("prev_output == 'old'", true),
        ("data.missing is None", true),
        ("True == true and None == null", true),
        ("output.strip().startswith('{')", true),
        ("output.count('ok') == 2", true),
        ("output.find('checks') == 2", true),
        (
            "len('a b c'.split()) == 3 and 'a,b'.split(',')[1] == 'b'",
            true,
        ),
        ("'x\\ny'.splitlines() == ['x', 'y']", true),
        ("data.keys() == ['checks', 'count', 'tags']", true),
    ];
    for (cond, want) in cases {
        // Comprehensions are not part of the language: refused, not guessed.
        if cond.contains(" for ") {
            assert!(Condition::parse(cond).is_err(), "{cond}");
            continue;
        }
        assert_eq!(holds(cond, &j), Ok(*want), "{cond}");
    }
}

#[test]
fn regular_expressions_match_anywhere_in_the_text() {
    let p = poll("deploy v1.42.0 finished in 12s\n", 0, None);
    let cases: &[(&str, bool)] = &[
        (r#"output matches "v1\.\d+\.0""#, true),
        (r#"output =~ "^deploy""#, true),
        (r#"output matches "(?m)in \d+s$""#, true),
        (r#"output matches "failed""#, false),
        (r#"not (output matches "(?i)ERROR")"#, true),
        // A computed pattern is compiled when it is evaluated.
        (r#"output matches ("v1" + "\.42")"#, true),
    ];
    for (cond, want) in cases {
        assert_eq!(holds(cond, &p), Ok(*want), "{cond}");
    }
}

#[test]
fn malformed_conditions_are_refused_saying_what_and_where() {
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("   ", "empty"),
        ("exit_code ==", "syntax error at column 13: expected"),
        ("exit_code = 0", "syntax error at column 11"),
        ("(exit_code == 0", "syntax error"),
        ("exit_code == 0)", "syntax error at column 15"),
        ("\"unterminated", "syntax error"),
        (
            "foo == 1",
            "unknown name `foo` (known: output, data, exit_code",
        ),
        ("open('x')", "unknown function `open`"),
        ("__import__('os')", "unknown function `__import__`"),
        ("exec('1')", "unknown function `exec`"),
        ("output.format()", "unknown method `.format()`"),
        (r#"output matches "(unclosed""#, "bad regular expression"),
        ("and", "syntax error"),
        ("exit_code == 0 and", "syntax error"),
        ("lambda: 1", "syntax error"),
        // Adjacent strings do not concatenate.
        ("'it''s' == 'its'", "syntax error"),
    ];
    for (cond, want) in cases {
        let e = Condition::parse(cond).expect_err(cond).to_string();
        assert!(e.contains(want), "{cond:?}: {e}");
    }
    let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    assert!(
        Condition::parse(&deep)
            .unwrap_err()
            .to_string()
            .contains("nests deeper")
    );
    let long = format!("exit_code == 0{}", " or exit_code == 0".repeat(80));
    assert!(
        Condition::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("at most 1000")
    );
    // Brackets inside strings do not count towards nesting.
    assert!(Condition::parse(&format!("'{}' in output", "(".repeat(40))).is_ok());
}

#[test]
fn evaluation_errors_are_typed_not_panics() {
    let text = poll("plain text", 0, None);
    let cases: &[(&str, &str)] = &[
        ("data['state'] == 'x'", "cannot index None"),
        ("output > 3", "cannot compare a string with a number"),
        ("output - 1", "- needs a number"),
        ("len(exit_code) == 1", "len() of a number"),
        ("1 / 0", "division by zero"),
        ("int('seven')", "cannot read \"seven\""),
        ("[1, 2][5]", "out of range"),
        ("min([])", "empty list"),
        ("exit_code in 3", "cannot look for a number in a number"),
    ];
    for (cond, want) in cases {
        let r = holds(cond, &text);
        assert!(
            matches!(&r, Err(e) if e.starts_with("eval:") && e.contains(want)),
            "{cond}: {r:?}"
        );
    }
    let missing = poll(r#"{"a": 1}"#, 0, None);
    let e = holds("data['b'] == 1", &missing).unwrap_err();
    assert!(e.contains(".get(\"b\")"), "{e}");
}

#[test]
fn specs_are_held_to_the_references_limits() {
    assert!(check_spec("ci", "gh pr checks", 30, 100, Some("exit_code == 0")).is_ok());
    assert!(
        check_spec("ci", "gh pr checks", 30, 100, None)
            .unwrap()
            .is_none()
    );
    assert!(
        check_spec("ci", "x", 30, 100, Some("  "))
            .unwrap()
            .is_none()
    );
    assert_eq!(
        check_spec("ci", "x", 9, 100, None).unwrap_err(),
        SpecError::Interval(9)
    );
    assert_eq!(
        check_spec("ci", "x", 24 * 3600 + 1, 100, None).unwrap_err(),
        SpecError::Interval(86401)
    );
    assert!(check_spec("ci", "x", 10, 1, None).is_ok());
    assert!(check_spec("ci", "x", 86400, 1, None).is_ok());
    assert_eq!(
        check_spec("ci", "x", 30, 0, None).unwrap_err(),
        SpecError::Polls(0)
    );
    assert!(matches!(
        check_spec("bad name", "x", 30, 1, None),
        Err(SpecError::Name(_))
    ));
    assert_eq!(
        check_spec("ci", " ", 30, 1, None).unwrap_err(),
        SpecError::Command
    );
    let e = check_spec("ci", "x", 30, 1, Some("exit_code ==")).unwrap_err();
    assert!(e.to_string().starts_with("stop_on: syntax error"), "{e}");
}

#[test]
fn output_is_trimmed_from_the_front_at_a_char_boundary() {
    let long = format!("{}é{}", "a".repeat(MAX_OUTPUT_BYTES), "tail");
    let t = trim_output(&long);
    assert!(t.len() <= MAX_OUTPUT_BYTES && t.ends_with("tail"));
    assert_eq!(trim_output("short"), "short");
}
