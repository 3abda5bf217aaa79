//! Schema-guided repair of model arguments. Models often send scalars as
//! strings (`"near_line": "3"`, `"timeout": "30"`, `"replace_all": "true"`)
//! or an array as its JSON text; strict deserialisation in the guest would
//! refuse them with a serde message the model cannot act on. The tool's own
//! JSON Schema says what each parameter is, so the host converts exactly the
//! values whose declared type is not string, and nothing else.

use serde_json::{Map, Value};

/// How deep `$ref`s and nesting are followed (schemas from `describe` are
/// untrusted; a self-referencing one must not loop).
const MAX_DEPTH: usize = 32;

/// Converts string-typed scalars in `value` to the types `schema` declares.
/// Returns whether anything changed.
pub fn coerce(value: &mut Value, schema: &Value) -> bool {
    walk(value, schema, schema, 0)
}

fn walk(value: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Some(schema) = resolve(schema, root, depth) else {
        return false;
    };
    // `anyOf`/`oneOf` (Option<Struct>, enums of shapes): the first branch that
    // changes the value wins; a value already valid for a branch stays as is.
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            for b in branches {
                if walk(value, b, root, depth + 1) {
                    return true;
                }
            }
        }
    }
    let types = declared_types(schema);
    if let Value::String(s) = value
        && !types.is_empty()
        && !types.contains(&"string")
        && let Some(converted) = convert(s, &types)
    {
        *value = converted;
        // Nested members of a decoded array or object are repaired too.
        walk(value, schema, root, depth + 1);
        return true;
    }
    let mut changed = false;
    match value {
        Value::Object(members) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    if let Some(v) = members.get_mut(name) {
                        changed |= walk(v, sub, root, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items {
                    changed |= walk(v, sub, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    changed
}

/// Follows a local `$ref` (`#/$defs/X`, `#/definitions/X`).
fn resolve<'a>(schema: &'a Value, root: &'a Value, depth: usize) -> Option<&'a Value> {
    let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
        return Some(schema);
    };
    if depth > MAX_DEPTH {
        return None;
    }
    let target = root.pointer(reference.strip_prefix('#')?)?;
    resolve(target, root, depth + 1)
}

fn declared_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn convert(text: &str, types: &[&str]) -> Option<Value> {
    let t = text.trim();
    for ty in types {
        let v = match *ty {
            "integer" => t
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| t.parse::<u64>().map(Value::from))
                .ok()
                .or_else(|| integral_float(t)),
            "number" => t
                .parse::<i64>()
                .map(Value::from)
                .ok()
                .or_else(|| t.parse::<f64>().ok().and_then(finite)),
            "boolean" => match t.to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "array" => serde_json::from_str::<Value>(t)
                .ok()
                .filter(Value::is_array),
            "object" => serde_json::from_str::<Value>(t)
                .ok()
                .filter(Value::is_object),
            "null" if t.is_empty() || t == "null" => Some(Value::Null),
            _ => None,
        };
        if v.is_some() {
            return v;
        }
    }
    None
}

/// `"3.0"` for an integer parameter is 3; `"3.5"` is left for the tool to refuse.
fn integral_float(t: &str) -> Option<Value> {
    let f = t.parse::<f64>().ok()?;
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15).then(|| Value::from(f as i64))
}

fn finite(f: f64) -> Option<Value> {
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// Repairs `raw` (a JSON object's text) against `schema`: the text itself when
/// nothing needed converting (byte-exact), else the re-serialised object.
pub fn coerce_text(raw: &str, object: Map<String, Value>, schema: &Value) -> String {
    let mut value = Value::Object(object);
    if coerce(&mut value, schema) {
        value.to_string()
    } else {
        raw.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shape schemars 1.x emits for edit_file-like arguments.
    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "near_line": {"type": ["integer", "null"], "format": "uint", "minimum": 0},
                "replace_all": {"type": "boolean", "default": false},
                "ratio": {"type": "number"},
                "name": {"type": ["string", "null"]},
                "edits": {"type": ["array", "null"], "items": {"$ref": "#/$defs/EditEntry"}},
                "opts": {"anyOf": [{"$ref": "#/$defs/Opts"}, {"type": "null"}]}
            },
            "$defs": {
                "EditEntry": {"type": "object", "properties": {
                    "old_string": {"type": "string"},
                    "near_line": {"type": ["integer", "null"]}
                }},
                "Opts": {"type": "object", "properties": {"limit": {"type": "integer"}}}
            }
        })
    }

    fn fix(v: Value) -> Value {
        let mut v = v;
        coerce(&mut v, &schema());
        v
    }

    #[test]
    fn string_scalars_become_their_declared_types() {
        assert_eq!(
            fix(json!({"path": "a", "near_line": "3", "replace_all": "TRUE", "ratio": "0.5"})),
            json!({"path": "a", "near_line": 3, "replace_all": true, "ratio": 0.5})
        );
        assert_eq!(fix(json!({"near_line": " 12 "})), json!({"near_line": 12}));
        assert_eq!(fix(json!({"near_line": "4.0"})), json!({"near_line": 4}));
    }

    #[test]
    fn nested_refs_arrays_and_options_are_followed() {
        assert_eq!(
            fix(json!({"edits": [{"old_string": "7", "near_line": "7"}], "opts": {"limit": "5"}})),
            json!({"edits": [{"old_string": "7", "near_line": 7}], "opts": {"limit": 5}})
        );
        // An array sent as its JSON text.
        assert_eq!(
            fix(json!({"edits": "[{\"old_string\": \"x\", \"near_line\": \"2\"}]"})),
            json!({"edits": [{"old_string": "x", "near_line": 2}]})
        );
    }

    #[test]
    fn strings_and_unconvertible_values_are_left_alone() {
        for v in [
            json!({"path": "3", "name": "42"}),
            json!({"near_line": "three"}),
            json!({"near_line": "3.5"}),
            json!({"replace_all": "yes"}),
            json!({"near_line": 3, "unknown": "4"}),
        ] {
            assert_eq!(fix(v.clone()), v);
        }
    }

    #[test]
    fn unchanged_text_stays_byte_exact() {
        let raw = r#"{ "path" : "a",   "near_line": 3 }"#;
        let obj = serde_json::from_str::<Value>(raw).unwrap();
        let Value::Object(m) = obj else { panic!() };
        assert_eq!(coerce_text(raw, m, &schema()), raw);
    }

    #[test]
    fn self_referencing_schemas_terminate() {
        let s = json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}});
        let mut v = json!({"x": "1"});
        assert!(!coerce(&mut v, &s));
        let s = json!({"$defs": {"N": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}, "k": {"type": "integer"}}}}, "$ref": "#/$defs/N"});
        let mut v = json!({"n": {"n": {"k": "2"}}, "k": "1"});
        assert!(coerce(&mut v, &s));
        assert_eq!(v, json!({"n": {"n": {"k": 2}}, "k": 1}));
    }
}
