//! Values a condition computes with, and what its operators, functions and
//! methods do to them (Python's meaning where the original relied on it).

use crate::cond::BinOp;
use std::collections::BTreeMap;

/// A value: what JSON holds, with numbers as `f64`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None` / `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A list.
    List(Vec<Value>),
    /// An object.
    Map(BTreeMap<String, Value>),
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => Value::Num(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Value::Str(s),
            serde_json::Value::Array(a) => Value::List(a.into_iter().map(Value::from).collect()),
            serde_json::Value::Object(o) => {
                Value::Map(o.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
            }
        }
    }
}

impl Value {
    /// The type's name in error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "None",
            Value::Bool(_) => "a boolean",
            Value::Num(_) => "a number",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
            Value::Map(_) => "an object",
        }
    }
}

/// Python's truthiness.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Num(n) => *n != 0.0 && !n.is_nan(),
        Value::Str(s) => !s.is_empty(),
        Value::List(l) => !l.is_empty(),
        Value::Map(m) => !m.is_empty(),
    }
}

/// `str(v)`: numbers without a needless `.0`, JSON for lists and objects.
fn to_text(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", *n as i64),
        Value::Num(n) => n.to_string(),
        Value::Str(s) => s.clone(),
        other => to_json(other).to_string(),
    }
}

fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Num(n) => {
            serde_json::Number::from_f64(*n).map_or(serde_json::Value::Null, Into::into)
        }
        Value::Str(s) => s.clone().into(),
        Value::List(l) => l.iter().map(to_json).collect(),
        Value::Map(m) => m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect(),
    }
}

fn order(a: &Value, b: &Value) -> Result<std::cmp::Ordering, String> {
    match (a, b) {
        (Value::Num(x), Value::Num(y)) => x
            .partial_cmp(y)
            .ok_or_else(|| "cannot order NaN".to_string()),
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Ok(x.cmp(y)),
        _ => Err(format!("cannot compare {} with {}", a.kind(), b.kind())),
    }
}

fn contains(haystack: &Value, needle: &Value) -> Result<bool, String> {
    match (haystack, needle) {
        (Value::Str(h), Value::Str(n)) => Ok(h.contains(n.as_str())),
        (Value::List(l), n) => Ok(l.contains(n)),
        (Value::Map(m), Value::Str(k)) => Ok(m.contains_key(k)),
        (h, n) => Err(format!("cannot look for {} in {}", n.kind(), h.kind())),
    }
}

fn num(v: &Value, what: &str) -> Result<f64, String> {
    match v {
        Value::Num(n) => Ok(*n),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        other => Err(format!("{what} needs a number, not {}", other.kind())),
    }
}

/// `a op b`.
pub(crate) fn binary(op: BinOp, a: Value, b: Value) -> Result<Value, String> {
    use std::cmp::Ordering::{Greater, Less};
    Ok(Value::Bool(match op {
        BinOp::Eq | BinOp::Is => a == b,
        BinOp::Ne | BinOp::IsNot => a != b,
        BinOp::Lt => order(&a, &b)? == Less,
        BinOp::Le => order(&a, &b)? != Greater,
        BinOp::Gt => order(&a, &b)? == Greater,
        BinOp::Ge => order(&a, &b)? != Less,
        BinOp::In => contains(&b, &a)?,
        BinOp::NotIn => !contains(&b, &a)?,
        BinOp::Contains => contains(&a, &b)?,
        BinOp::Add => {
            return match (a, b) {
                (Value::Str(x), Value::Str(y)) => Ok(Value::Str(x + &y)),
                (Value::List(mut x), Value::List(y)) => {
                    x.extend(y);
                    Ok(Value::List(x))
                }
                (x, y) => Ok(Value::Num(num(&x, "+")? + num(&y, "+")?)),
            };
        }
        BinOp::Sub => return Ok(Value::Num(num(&a, "-")? - num(&b, "-")?)),
        BinOp::Mul => return Ok(Value::Num(num(&a, "*")? * num(&b, "*")?)),
        BinOp::Div | BinOp::Rem => {
            let (x, y) = (num(&a, "/")?, num(&b, "/")?);
            if y == 0.0 {
                return Err("division by zero".into());
            }
            return Ok(Value::Num(if op == BinOp::Div { x / y } else { x % y }));
        }
        BinOp::Or | BinOp::And => {
            // Short-circuiting: evaluated by the caller.
            return Err("internal: and/or are not binary here".into());
        }
    }))
}

/// `target[key]`: a list by (negative) index, an object by key, a string by
/// character.
pub(crate) fn index(target: &Value, key: &Value) -> Result<Value, String> {
    let pos = |len: usize, n: f64| -> Result<usize, String> {
        let i = n as i64;
        let i = if i < 0 { len as i64 + i } else { i };
        usize::try_from(i)
            .ok()
            .filter(|i| *i < len)
            .ok_or_else(|| format!("index {n} is out of range (length {len})"))
    };
    match (target, key) {
        (Value::List(l), Value::Num(n)) => Ok(l[pos(l.len(), *n)?].clone()),
        (Value::Str(s), Value::Num(n)) => {
            let chars: Vec<char> = s.chars().collect();
            Ok(Value::Str(chars[pos(chars.len(), *n)?].to_string()))
        }
        (Value::Map(m), Value::Str(k)) => m
            .get(k)
            .cloned()
            .ok_or_else(|| format!("no key {k:?} (use .get({k:?}) when it may be missing)")),
        (Value::Null, _) => Err("cannot index None (the output is not JSON?)".into()),
        (t, k) => Err(format!("cannot index {} with {}", t.kind(), k.kind())),
    }
}

fn arity(name: &str, args: &[Value], n: std::ops::RangeInclusive<usize>) -> Result<(), String> {
    if n.contains(&args.len()) {
        Ok(())
    } else {
        Err(format!(
            "{name}() takes {} argument(s), not {}",
            if n.start() == n.end() {
                n.start().to_string()
            } else {
                format!("{} to {}", n.start(), n.end())
            },
            args.len()
        ))
    }
}

fn items(v: Value, name: &str) -> Result<Vec<Value>, String> {
    match v {
        Value::List(l) => Ok(l),
        Value::Map(m) => Ok(m.into_keys().map(Value::Str).collect()),
        Value::Str(s) => Ok(s.chars().map(|c| Value::Str(c.to_string())).collect()),
        other => Err(format!("{name}() needs a list, not {}", other.kind())),
    }
}

/// A function call.
pub(crate) fn call(name: &str, mut args: Vec<Value>) -> Result<Value, String> {
    match name {
        "len" => {
            arity(name, &args, 1..=1)?;
            let n = match &args[0] {
                Value::Str(s) => s.chars().count(),
                Value::List(l) => l.len(),
                Value::Map(m) => m.len(),
                other => return Err(format!("len() of {}", other.kind())),
            };
            Ok(Value::Num(n as f64))
        }
        "str" => {
            arity(name, &args, 1..=1)?;
            Ok(Value::Str(to_text(&args[0])))
        }
        "int" | "float" => {
            arity(name, &args, 1..=1)?;
            let n = match &args[0] {
                Value::Num(n) => *n,
                Value::Bool(b) => f64::from(u8::from(*b)),
                Value::Str(s) => s
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("{name}() cannot read {s:?} as a number"))?,
                other => return Err(format!("{name}() of {}", other.kind())),
            };
            Ok(Value::Num(if name == "int" { n.trunc() } else { n }))
        }
        "bool" => {
            arity(name, &args, 1..=1)?;
            Ok(Value::Bool(truthy(&args[0])))
        }
        "abs" => {
            arity(name, &args, 1..=1)?;
            Ok(Value::Num(num(&args[0], "abs()")?.abs()))
        }
        "min" | "max" => {
            let list = if args.len() == 1 {
                items(args.remove(0), name)?
            } else {
                args
            };
            let mut best: Option<Value> = None;
            for v in list {
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let less = order(&v, &b)? == std::cmp::Ordering::Less;
                        if less == (name == "min") { v } else { b }
                    }
                });
            }
            best.ok_or_else(|| format!("{name}() of an empty list"))
        }
        "any" | "all" => {
            arity(name, &args, 1..=1)?;
            let list = items(args.remove(0), name)?;
            Ok(Value::Bool(if name == "any" {
                list.iter().any(truthy)
            } else {
                list.iter().all(truthy)
            }))
        }
        "sorted" => {
            arity(name, &args, 1..=1)?;
            let mut list = items(args.remove(0), name)?;
            let mut failure = None;
            list.sort_by(|a, b| {
                order(a, b).unwrap_or_else(|e| {
                    failure.get_or_insert(e);
                    std::cmp::Ordering::Equal
                })
            });
            match failure {
                Some(e) => Err(e),
                None => Ok(Value::List(list)),
            }
        }
        other => Err(format!("unknown function {other}()")),
    }
}

fn text_arg(args: &[Value], i: usize, method: &str) -> Result<String, String> {
    match args.get(i) {
        Some(Value::Str(s)) => Ok(s.clone()),
        Some(other) => Err(format!(".{method}() needs a string, not {}", other.kind())),
        None => Err(format!(".{method}() needs an argument")),
    }
}

/// `target.name(args)`.
pub(crate) fn method(target: Value, name: &str, args: Vec<Value>) -> Result<Value, String> {
    match (&target, name) {
        (Value::Map(m), "get") => {
            let key = text_arg(&args, 0, name)?;
            Ok(m.get(&key)
                .cloned()
                .unwrap_or_else(|| args.get(1).cloned().unwrap_or(Value::Null)))
        }
        // `data.get(...)` on output that is not a JSON object: nothing there.
        (Value::Null, "get") => Ok(args.get(1).cloned().unwrap_or(Value::Null)),
        (Value::Map(m), "keys") => Ok(Value::List(m.keys().cloned().map(Value::Str).collect())),
        (Value::Map(m), "values") => Ok(Value::List(m.values().cloned().collect())),
        (Value::Str(s), _) => {
            let s = s.as_str();
            Ok(match name {
                "lower" => Value::Str(s.to_lowercase()),
                "upper" => Value::Str(s.to_uppercase()),
                "strip" => Value::Str(s.trim().to_string()),
                "lstrip" => Value::Str(s.trim_start().to_string()),
                "rstrip" => Value::Str(s.trim_end().to_string()),
                "startswith" => Value::Bool(s.starts_with(&text_arg(&args, 0, name)?)),
                "endswith" => Value::Bool(s.ends_with(&text_arg(&args, 0, name)?)),
                "contains" => Value::Bool(s.contains(&text_arg(&args, 0, name)?)),
                "count" => Value::Num(s.matches(&text_arg(&args, 0, name)?).count() as f64),
                "find" => {
                    let needle = text_arg(&args, 0, name)?;
                    Value::Num(
                        s.find(&needle)
                            .map_or(-1.0, |b| s[..b].chars().count() as f64),
                    )
                }
                "split" => Value::List(match args.first() {
                    None => s
                        .split_whitespace()
                        .map(|p| Value::Str(p.to_string()))
                        .collect(),
                    Some(_) => {
                        let sep = text_arg(&args, 0, name)?;
                        if sep.is_empty() {
                            return Err(".split() with an empty separator".into());
                        }
                        s.split(sep.as_str())
                            .map(|p| Value::Str(p.to_string()))
                            .collect()
                    }
                }),
                "splitlines" => Value::List(s.lines().map(|l| Value::Str(l.to_string())).collect()),
                _ => return Err(format!("a string has no .{name}()")),
            })
        }
        (Value::List(l), "count") => Ok(Value::Num(
            l.iter().filter(|v| Some(*v) == args.first()).count() as f64,
        )),
        (Value::List(l), "contains") => {
            Ok(Value::Bool(args.first().is_some_and(|a| l.contains(a))))
        }
        _ => Err(format!("{} has no .{name}()", target.kind())),
    }
}
