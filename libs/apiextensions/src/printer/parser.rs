//! The parser of client-go's JSONPath templates (`util/jsonpath/parser.go`): text with `{...}`
//! actions. Its quirks are kept because CRD authors write paths against kube's behaviour:
//! `['a.b']` is the same as `.a.b` (a bracket key is re-parsed as a dotted path), `[]` is
//! `[0]`, a filter is split at its first run of `!<>=` characters, and the error texts are
//! kube's.

use std::sync::OnceLock;

use regex::Regex;

use super::gofmt;

/// One part of a template: literal text, or an action's nodes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Segment {
    /// Text outside `{...}`, printed as is.
    Text(String),
    /// The nodes of one `{...}` action, applied in order.
    Action(Vec<Node>),
}

/// One bound of an array slice, as the parser knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Param {
    pub(crate) value: i64,
    /// Written in the path (otherwise the array's bounds apply).
    pub(crate) known: bool,
    /// The end of a single index (`[i]` is `[i:i+1]`), so `[-1]` ends at the array's end.
    pub(crate) derived: bool,
}

/// A step of an action.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// A quoted string literal (filter operands).
    Text(String),
    /// `.name`: a map key.
    Field(String),
    /// A bare word other than `true`/`false` (`range`, `end`).
    Identifier(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// `[start:end:step]`.
    Array([Param; 3]),
    /// `[?(left op right)]`; `op` is `None` for an existence test `[?(@.x)]`.
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        op: Option<String>,
    },
    /// `.*` or `[*]`.
    Wildcard,
    /// `..`.
    Recursive,
    /// `[a,b]`: each branch applied to the same input.
    Union(Vec<Vec<Node>>),
}

fn dict_key_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^'([^']*)'$").expect("constant regex"))
}

fn slice_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?$").expect("constant regex"))
}

fn filter_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^([^!<>=]+)([!<>=]+)(.+?)$").expect("constant regex"))
}

/// Parses a whole template (`{.a}text{.b}`) into its segments.
pub(crate) fn parse_template(input: &str) -> Result<Vec<Segment>, String> {
    let mut p = Parser { input, pos: 0 };
    let mut segments = Vec::new();
    loop {
        let rest = &input[p.pos..];
        match rest.find('{') {
            None => {
                if !rest.is_empty() {
                    segments.push(Segment::Text(rest.to_owned()));
                }
                return Ok(segments);
            }
            Some(at) => {
                if at > 0 {
                    segments.push(Segment::Text(rest[..at].to_owned()));
                }
                p.pos += at + 1;
                segments.push(Segment::Action(p.parse_action()?));
            }
        }
    }
}

/// Parses `{text}` and returns the first action's nodes, as jsonpath does for filter operands,
/// union branches and bracket keys (whatever follows a stray `}` is dropped).
fn parse_sub_action(text: &str) -> Result<Vec<Node>, String> {
    let segments = parse_template(&format!("{{{text}}}"))?;
    Ok(match segments.into_iter().next() {
        Some(Segment::Action(nodes)) => nodes,
        _ => Vec::new(),
    })
}

fn is_terminator(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => matches!(c, ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'),
    }
}

/// Go's `unicode.IsDigit` (decimal digits of any script), approximated.
fn is_digit(c: char) -> bool {
    c.is_ascii_digit() || (!c.is_ascii() && c.is_numeric())
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || is_digit(c)
}

struct Parser<'s> {
    input: &'s str,
    /// Byte offset of the next character.
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// The byte two before `pos`: the one before a just-read ASCII quote (escape check).
    fn escaped(&self) -> bool {
        self.pos >= 2 && self.input.as_bytes().get(self.pos - 2) == Some(&b'\\')
    }

    /// Parses the inside of an action whose `{` is consumed, through its `}`.
    fn parse_action(&mut self) -> Result<Vec<Node>, String> {
        let mut nodes = Vec::new();
        loop {
            let rest = &self.input[self.pos..];
            if rest.starts_with('}') {
                self.pos += 1;
                return Ok(nodes);
            }
            if rest.starts_with("[?(") {
                self.pos += 3;
                nodes.push(self.parse_filter()?);
                continue;
            }
            if rest.starts_with("..") {
                if matches!(nodes.last(), Some(Node::Recursive)) {
                    return Err("invalid multiple recursive descent".to_owned());
                }
                self.pos += 2;
                nodes.push(Node::Recursive);
                if self.peek().is_some_and(is_alphanumeric) {
                    nodes.push(self.parse_field());
                }
                continue;
            }
            let start = self.pos;
            match self.next() {
                None | Some('\r' | '\n') => return Err("unclosed action".to_owned()),
                Some(' ' | '@' | '$') => {}
                Some('[') => self.parse_array(start, &mut nodes)?,
                Some(q @ ('"' | '\'')) => nodes.push(self.parse_quote(start, q)?),
                Some('.') => nodes.push(self.parse_field()),
                Some(c) if c == '+' || c == '-' || is_digit(c) => {
                    self.pos = start;
                    nodes.push(self.parse_number()?);
                }
                Some(c) if is_alphanumeric(c) => {
                    self.pos = start;
                    nodes.push(self.parse_identifier());
                }
                Some(c) => return Err(format!("unrecognized character in action: {}", gofmt::unicode_desc(c))),
            }
        }
    }

    /// Reads up to the next unescaped terminator; used after `.`.
    fn parse_field(&mut self) -> Node {
        let start = self.pos;
        loop {
            let c = self.peek();
            if c == Some('\\') {
                self.next();
                self.next();
            } else if is_terminator(c) {
                break;
            } else {
                self.next();
            }
        }
        let value = &self.input[start..self.pos];
        if value == "*" {
            Node::Wildcard
        } else {
            Node::Field(value.replace('\\', ""))
        }
    }

    fn parse_identifier(&mut self) -> Node {
        let start = self.pos;
        while !is_terminator(self.peek()) {
            self.next();
        }
        match &self.input[start..self.pos] {
            "true" => Node::Bool(true),
            "false" => Node::Bool(false),
            word => Node::Identifier(word.to_owned()),
        }
    }

    fn parse_number(&mut self) -> Result<Node, String> {
        let start = self.pos;
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        while self.peek().is_some_and(|c| c == '.' || is_digit(c)) {
            self.next();
        }
        let text = &self.input[start..self.pos];
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Node::Int(i));
        }
        // Rust accepts a few spellings Go does not (`inf`), but none of them can be scanned here.
        match text.parse::<f64>() {
            Ok(f) if text.bytes().any(|b| b.is_ascii_digit()) => Ok(Node::Float(f)),
            _ => Err(format!("cannot parse number {text}")),
        }
    }

    /// `[...]` whose `[` is at `open`: a union, a bracket key or a slice.
    fn parse_array(&mut self, open: usize, nodes: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated array".to_owned()),
                Some(']') => break,
                Some(_) => {}
            }
        }
        let mut text = &self.input[open + 1..self.pos - 1];
        if text == "*" {
            text = ":";
        }
        if text.contains(',') {
            let mut branches = Vec::new();
            for part in text.split(',') {
                branches.push(parse_sub_action(&format!("[{}]", part.trim_matches(' ')))?);
            }
            nodes.push(Node::Union(branches));
            return Ok(());
        }
        if let Some(key) = dict_key_re().captures(text).and_then(|c| c.get(1)) {
            nodes.extend(parse_sub_action(&format!(".{}", key.as_str()))?);
            return Ok(());
        }
        let caps = slice_re().captures(text).ok_or_else(|| format!("invalid array index {text}"))?;
        let mut params = [Param::default(); 3];
        for i in 0..3 {
            let group = caps.get(i + 1).map_or("", |m| m.as_str());
            if group.is_empty() {
                if i == 1 {
                    params[1] = Param { value: params[0].value.wrapping_add(1), known: true, derived: true };
                }
                continue;
            }
            let digits = if i > 0 { &group[1..] } else { group };
            if i > 0 && digits.is_empty() {
                continue;
            }
            let value = digits.parse::<i64>().map_err(|_| format!("array index {digits} is not a number"))?;
            params[i] = Param { value, known: true, derived: false };
        }
        nodes.push(Node::Array(params));
        Ok(())
    }

    /// `[?(...)]` whose `[?(` is consumed.
    fn parse_filter(&mut self) -> Result<Node, String> {
        let start = self.pos;
        let (mut begin, mut end, mut pair) = (false, false, '"');
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated filter".to_owned()),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                    } else if q == pair && !self.escaped() {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                Some(_) => {}
            }
        }
        if self.next() != Some(']') {
            return Err("unclosed array expect ]".to_owned());
        }
        let text = &self.input[start..self.pos - 2];
        match filter_re().captures(text) {
            None => Ok(Node::Filter { left: parse_sub_action(text)?, right: Vec::new(), op: None }),
            Some(caps) => {
                let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
                let left = parse_sub_action(group(1))?;
                let right = parse_sub_action(group(3))?;
                Ok(Node::Filter { left, right, op: Some(group(2).to_owned()) })
            }
        }
    }

    /// A quoted string whose opening quote (at `open`) is consumed.
    fn parse_quote(&mut self, open: usize, quote: char) -> Result<Node, String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated quoted string".to_owned()),
                Some(c) if c == quote && !self.escaped() => break,
                Some(_) => {}
            }
        }
        let text = &self.input[open..self.pos];
        gofmt::unquote(text).map(Node::Text).ok_or_else(|| format!("unquote string {text} error invalid syntax"))
    }
}
