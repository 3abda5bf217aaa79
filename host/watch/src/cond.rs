//! The stop-condition language: parsed once at create time (so a bad
//! condition is refused before anything runs), evaluated after every poll.
//!
//! It reads like the Python expressions the original accepted:
//! `data["state"] == "MERGED"`, `"error" in output`, `exit_code != 0`,
//! `changed and "ready" in output.lower()`,
//! `data.get("mergedAt") is not None` — plus `contains`, and regular
//! expressions with `matches` (or `=~`). Nothing is executed but this
//! evaluator: no host code, no imports, no loops.

use crate::value::{Value, truthy};
use pest::Parser;
use pest::iterators::{Pair, Pairs};
use pest::pratt_parser::{Assoc, Op, PrattParser};
use regex::Regex;
use std::sync::LazyLock;

#[derive(pest_derive::Parser)]
#[grammar = "cond.pest"]
struct Grammar;

/// Longest condition accepted.
pub const MAX_LEN: usize = 1000;
/// Deepest nesting of brackets accepted.
const MAX_DEPTH: usize = 32;
/// Largest compiled regular expression.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What a poll produced, as the condition sees it.
#[derive(Debug, Clone, Default)]
pub struct Poll {
    /// stdout (and stderr) of the command.
    pub output: String,
    /// Its exit code.
    pub exit_code: i64,
    /// The previous poll's output (none on the first poll).
    pub prev_output: Option<String>,
    /// Polls run so far, this one included.
    pub polls: u64,
}

/// The variables a condition may name.
pub const VARIABLES: &[&str] = &[
    "output",
    "data",
    "exit_code",
    "prev_output",
    "changed",
    "polls",
];

/// Functions a condition may call.
const FUNCTIONS: &[&str] = &[
    "len", "str", "int", "float", "bool", "abs", "min", "max", "any", "all", "sorted",
];

/// Methods a value may be asked for.
const METHODS: &[&str] = &[
    "lower",
    "upper",
    "strip",
    "lstrip",
    "rstrip",
    "startswith",
    "endswith",
    "get",
    "keys",
    "values",
    "split",
    "splitlines",
    "count",
    "find",
    "contains",
];

/// A condition that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// A condition that failed while it was evaluated (a type error, a missing
/// key used as a number): the poll counts as "not yet".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    Output,
    Data,
    ExitCode,
    PrevOutput,
    Changed,
    Polls,
}

/// A binary operator other than `and`/`or` (which short-circuit) and
/// `matches`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Is,
    IsNot,
    Contains,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone)]
enum Expr {
    Lit(Value),
    Var(Var),
    List(Vec<Expr>),
    Call(String, Vec<Expr>),
    Method(Box<Expr>, String, Vec<Expr>),
    Index(Box<Expr>, Box<Expr>),
    Attr(Box<Expr>, String),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `x matches "re"` with a literal pattern, compiled once.
    MatchLit(Box<Expr>, Regex),
    /// `x matches y` with a computed pattern.
    MatchDyn(Box<Expr>, Box<Expr>),
}

/// A parsed stop condition.
#[derive(Debug, Clone)]
pub struct Condition {
    source: String,
    expr: Expr,
}

static PRATT: LazyLock<PrattParser<Rule>> = LazyLock::new(|| {
    PrattParser::new()
        .op(Op::infix(Rule::or_op, Assoc::Left))
        .op(Op::infix(Rule::and_op, Assoc::Left))
        .op(Op::prefix(Rule::not_op))
        .op(Op::infix(Rule::eq, Assoc::Left)
            | Op::infix(Rule::ne, Assoc::Left)
            | Op::infix(Rule::lt, Assoc::Left)
            | Op::infix(Rule::le, Assoc::Left)
            | Op::infix(Rule::gt, Assoc::Left)
            | Op::infix(Rule::ge, Assoc::Left)
            | Op::infix(Rule::in_op, Assoc::Left)
            | Op::infix(Rule::not_in, Assoc::Left)
            | Op::infix(Rule::is_op, Assoc::Left)
            | Op::infix(Rule::is_not, Assoc::Left)
            | Op::infix(Rule::contains_op, Assoc::Left)
            | Op::infix(Rule::matches_op, Assoc::Left)
            | Op::infix(Rule::regex_op, Assoc::Left))
        .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
        .op(Op::infix(Rule::mul, Assoc::Left)
            | Op::infix(Rule::div, Assoc::Left)
            | Op::infix(Rule::rem, Assoc::Left))
        .op(Op::prefix(Rule::neg))
        .op(Op::postfix(Rule::index) | Op::postfix(Rule::method) | Op::postfix(Rule::attr))
});

/// Rejects nesting deeper than [`MAX_DEPTH`] before the recursive parser
/// sees it (brackets inside string literals do not count).
fn check_depth(text: &str) -> Result<(), ParseError> {
    let (mut depth, mut quote, mut escaped) = (0usize, None::<char>, false);
    for c in text.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(ParseError(format!(
                        "the condition nests deeper than {MAX_DEPTH} brackets"
                    )));
                }
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn describe_rule(r: &Rule) -> &'static str {
    match r {
        Rule::EOI => "the end",
        Rule::expr | Rule::args => "an expression",
        Rule::index | Rule::method | Rule::attr => "`[`, `.`",
        Rule::number => "a number",
        Rule::string => "a string",
        Rule::name | Rule::ident | Rule::call => "a name",
        Rule::constant => "True, False or None",
        Rule::list => "a list",
        Rule::not_op | Rule::neg => "`not` or `-`",
        _ => "an operator",
    }
}

fn syntax_error(e: pest::error::Error<Rule>, text: &str) -> ParseError {
    use pest::error::{ErrorVariant, InputLocation};
    let at = match e.location {
        InputLocation::Pos(p) | InputLocation::Span((p, _)) => p,
    };
    let column = text[..at.min(text.len())].chars().count() + 1;
    let expected = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<&str> = positives.iter().map(describe_rule).collect();
            names.sort_unstable();
            names.dedup();
            if names.is_empty() {
                "nothing more".to_string()
            } else {
                names.join(" or ")
            }
        }
        ErrorVariant::CustomError { message } => message.clone(),
    };
    let found = text[at.min(text.len())..]
        .chars()
        .take(12)
        .collect::<String>();
    let found = if found.is_empty() {
        "the end".to_string()
    } else {
        format!("`{found}`")
    };
    ParseError(format!(
        "syntax error at column {column}: expected {expected}, found {found}"
    ))
}

fn unescape(raw: &str) -> Result<String, ParseError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some(c @ ('\\' | '"' | '\'')) => out.push(c),
            // Regular expressions keep their escapes (`\d`, `\.`).
            Some(c) => {
                out.push('\\');
                out.push(c);
            }
            None => return Err(ParseError("a string ends with a lone backslash".into())),
        }
    }
    Ok(out)
}

fn args_of(pair: Option<Pair<Rule>>) -> Result<Vec<Expr>, ParseError> {
    match pair {
        Some(p) => p.into_inner().map(|e| build(e.into_inner())).collect(),
        None => Ok(Vec::new()),
    }
}

fn compile_regex(pattern: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("bad regular expression {pattern:?}: {e}"))
}

fn primary(pair: Pair<Rule>) -> Result<Expr, ParseError> {
    Ok(match pair.as_rule() {
        Rule::number => {
            let n: f64 = pair
                .as_str()
                .parse()
                .map_err(|_| ParseError(format!("bad number {}", pair.as_str())))?;
            Expr::Lit(Value::Num(n))
        }
        Rule::string => {
            let inner = pair.into_inner().next().map(|p| p.as_str()).unwrap_or("");
            Expr::Lit(Value::Str(unescape(inner)?))
        }
        Rule::constant => Expr::Lit(match pair.as_str() {
            "True" | "true" => Value::Bool(true),
            "False" | "false" => Value::Bool(false),
            _ => Value::Null,
        }),
        Rule::list => Expr::List(args_of(pair.into_inner().next())?),
        Rule::call => {
            let mut inner = pair.into_inner();
            let name = inner
                .next()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default();
            if !FUNCTIONS.contains(&name.as_str()) {
                return Err(ParseError(format!(
                    "unknown function `{name}` (known: {})",
                    FUNCTIONS.join(", ")
                )));
            }
            Expr::Call(name, args_of(inner.next())?)
        }
        Rule::name => {
            let name = pair.as_str();
            Expr::Var(match name {
                "output" => Var::Output,
                "data" => Var::Data,
                "exit_code" => Var::ExitCode,
                "prev_output" => Var::PrevOutput,
                "changed" => Var::Changed,
                "polls" => Var::Polls,
                other => {
                    return Err(ParseError(format!(
                        "unknown name `{other}` (known: {})",
                        VARIABLES.join(", ")
                    )));
                }
            })
        }
        Rule::expr => build(pair.into_inner())?,
        other => return Err(ParseError(format!("unexpected {other:?}"))),
    })
}

fn build(pairs: Pairs<Rule>) -> Result<Expr, ParseError> {
    PRATT
        .map_primary(primary)
        .map_prefix(|op, rhs| {
            let rhs = Box::new(rhs?);
            Ok(match op.as_rule() {
                Rule::not_op => Expr::Not(rhs),
                _ => Expr::Neg(rhs),
            })
        })
        .map_postfix(|lhs, op| {
            let lhs = Box::new(lhs?);
            Ok(match op.as_rule() {
                Rule::index => {
                    let inner = op.into_inner().next().map(|p| build(p.into_inner()));
                    match inner {
                        Some(e) => Expr::Index(lhs, Box::new(e?)),
                        None => return Err(ParseError("empty index".into())),
                    }
                }
                Rule::method => {
                    let mut inner = op.into_inner();
                    let name = inner
                        .next()
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_default();
                    if !METHODS.contains(&name.as_str()) {
                        return Err(ParseError(format!(
                            "unknown method `.{name}()` (known: {})",
                            METHODS.join(", ")
                        )));
                    }
                    Expr::Method(lhs, name, args_of(inner.next())?)
                }
                _ => {
                    let name = op.into_inner().next().map(|p| p.as_str().to_string());
                    Expr::Attr(lhs, name.unwrap_or_default())
                }
            })
        })
        .map_infix(|lhs, op, rhs| {
            let (lhs, rhs) = (Box::new(lhs?), Box::new(rhs?));
            let bin = match op.as_rule() {
                Rule::or_op => BinOp::Or,
                Rule::and_op => BinOp::And,
                Rule::eq => BinOp::Eq,
                Rule::ne => BinOp::Ne,
                Rule::lt => BinOp::Lt,
                Rule::le => BinOp::Le,
                Rule::gt => BinOp::Gt,
                Rule::ge => BinOp::Ge,
                Rule::in_op => BinOp::In,
                Rule::not_in => BinOp::NotIn,
                Rule::is_op => BinOp::Is,
                Rule::is_not => BinOp::IsNot,
                Rule::contains_op => BinOp::Contains,
                Rule::add => BinOp::Add,
                Rule::sub => BinOp::Sub,
                Rule::mul => BinOp::Mul,
                Rule::div => BinOp::Div,
                Rule::rem => BinOp::Rem,
                // matches / =~
                _ => {
                    return Ok(match *rhs {
                        Expr::Lit(Value::Str(p)) => {
                            Expr::MatchLit(lhs, compile_regex(&p).map_err(ParseError)?)
                        }
                        other => Expr::MatchDyn(lhs, Box::new(other)),
                    });
                }
            };
            Ok(Expr::Binary(bin, lhs, rhs))
        })
        .parse(pairs)
}

impl Condition {
    /// Parses `text`; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(ParseError("the condition is empty".into()));
        }
        if trimmed.len() > MAX_LEN {
            return Err(ParseError(format!(
                "the condition is {} bytes; at most {MAX_LEN} are accepted",
                trimmed.len()
            )));
        }
        check_depth(trimmed)?;
        let mut pairs =
            Grammar::parse(Rule::condition, trimmed).map_err(|e| syntax_error(e, trimmed))?;
        let expr_pair = pairs
            .next()
            .and_then(|c| c.into_inner().next())
            .ok_or_else(|| ParseError("the condition is empty".into()))?;
        Ok(Self {
            source: trimmed.to_string(),
            expr: build(expr_pair.into_inner())?,
        })
    }

    /// The text it was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the condition holds for `poll`.
    pub fn holds(&self, poll: &Poll) -> Result<bool, EvalError> {
        let scope = Scope::new(poll);
        Ok(truthy(&eval(&self.expr, &scope)?))
    }
}

/// The variables of one poll.
struct Scope<'a> {
    poll: &'a Poll,
    data: Value,
}

impl<'a> Scope<'a> {
    fn new(poll: &'a Poll) -> Self {
        let data = serde_json::from_str::<serde_json::Value>(poll.output.trim())
            .map(Value::from)
            .unwrap_or(Value::Null);
        Self { poll, data }
    }

    fn var(&self, v: Var) -> Value {
        match v {
            Var::Output => Value::Str(self.poll.output.clone()),
            Var::Data => self.data.clone(),
            Var::ExitCode => Value::Num(self.poll.exit_code as f64),
            Var::PrevOutput => self
                .poll
                .prev_output
                .clone()
                .map_or(Value::Null, Value::Str),
            Var::Changed => Value::Bool(
                self.poll
                    .prev_output
                    .as_ref()
                    .is_some_and(|p| *p != self.poll.output),
            ),
            Var::Polls => Value::Num(self.poll.polls as f64),
        }
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError(msg.into()))
}

fn eval(e: &Expr, s: &Scope) -> Result<Value, EvalError> {
    match e {
        Expr::Lit(v) => Ok(v.clone()),
        Expr::Var(v) => Ok(s.var(*v)),
        Expr::List(items) => Ok(Value::List(
            items.iter().map(|i| eval(i, s)).collect::<Result<_, _>>()?,
        )),
        Expr::Not(x) => Ok(Value::Bool(!truthy(&eval(x, s)?))),
        Expr::Neg(x) => match eval(x, s)? {
            Value::Num(n) => Ok(Value::Num(-n)),
            other => err(format!("cannot negate {}", other.kind())),
        },
        Expr::Binary(BinOp::And, a, b) => {
            let l = eval(a, s)?;
            if truthy(&l) { eval(b, s) } else { Ok(l) }
        }
        Expr::Binary(BinOp::Or, a, b) => {
            let l = eval(a, s)?;
            if truthy(&l) { Ok(l) } else { eval(b, s) }
        }
        Expr::Binary(op, a, b) => {
            crate::value::binary(*op, eval(a, s)?, eval(b, s)?).map_err(EvalError)
        }
        Expr::MatchLit(x, re) => match eval(x, s)? {
            Value::Str(t) => Ok(Value::Bool(re.is_match(&t))),
            other => err(format!("`matches` needs a string, not {}", other.kind())),
        },
        Expr::MatchDyn(x, p) => match (eval(x, s)?, eval(p, s)?) {
            (Value::Str(t), Value::Str(p)) => Ok(Value::Bool(
                compile_regex(&p).map_err(EvalError)?.is_match(&t),
            )),
            (a, b) => err(format!(
                "`matches` needs two strings, not {} and {}",
                a.kind(),
                b.kind()
            )),
        },
        Expr::Index(x, i) => crate::value::index(&eval(x, s)?, &eval(i, s)?).map_err(EvalError),
        Expr::Attr(x, name) => Ok(match eval(x, s)? {
            Value::Map(m) => m.get(name).cloned().unwrap_or(Value::Null),
            _ => Value::Null,
        }),
        Expr::Call(f, args) => {
            let args = args
                .iter()
                .map(|a| eval(a, s))
                .collect::<Result<Vec<_>, _>>()?;
            crate::value::call(f, args).map_err(EvalError)
        }
        Expr::Method(x, m, args) => {
            let target = eval(x, s)?;
            let args = args
                .iter()
                .map(|a| eval(a, s))
                .collect::<Result<Vec<_>, _>>()?;
            crate::value::method(target, m, args).map_err(EvalError)
        }
    }
}
