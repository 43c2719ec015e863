//! `--token-auth-file`: static bearer tokens from a CSV file, as kube's `tokenfile` reads it.
//!
//! Each record is `token,user name,user uid[,"group1,group2"[,anything else]]`. The file is
//! read the way Go's `encoding/csv` reads it with kube's settings (any number of fields per
//! record, no comment character, no space trimming, strict quotes): empty lines are skipped,
//! quoted fields may hold commas, doubled quotes and line breaks, a `#` line is a record like any
//! other. Records with fewer than three fields make the whole file invalid; a record with an
//! empty token is skipped with a warning; a token that appears twice keeps its last record, with
//! a warning. The groups column is split on commas as is (kube does not trim the parts, so
//! `"a, b"` yields the groups `a` and ` b`, and an empty column one empty group).

use std::collections::HashMap;
use std::path::Path;

use ring::digest::{digest, SHA256};

use crate::token::{TokenAuthenticator, TokenOutcome};
use crate::user::UserInfo;

/// Why a token file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("reading token file '{path}': {source}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file is not valid CSV (Go's `csv.ParseError` wording).
    #[error("{0}")]
    Csv(CsvError),
    /// A record has fewer than three fields (kube's wording).
    #[error("token file '{path}' must have at least 3 columns (token, user name, user uid), found {found}")]
    TooFewColumns {
        /// The file (`<inline>` for [`TokenFileAuthenticator::from_csv`]).
        path: String,
        /// How many fields the record has.
        found: usize,
        /// The line the record starts on.
        line: usize,
    },
}

/// A CSV syntax error, located like Go's `csv.ParseError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvError {
    /// Line the record starts on (1-based).
    pub start_line: usize,
    /// Line of the error (1-based).
    pub line: usize,
    /// Column of the error (1-based, in characters).
    pub column: usize,
    /// Which quote rule was broken.
    pub kind: CsvErrorKind,
}

/// The quote rules of Go's strict CSV reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsvErrorKind {
    /// A `"` inside a field that does not start with one.
    BareQuote,
    /// A quoted field with text after its closing quote, or without a closing quote.
    Quote,
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            CsvErrorKind::BareQuote => "bare \" in non-quoted-field",
            CsvErrorKind::Quote => "extraneous or missing \" in quoted-field",
        };
        if self.start_line != self.line {
            write!(f, "record on line {}; ", self.start_line)?;
        }
        write!(f, "parse error on line {}, column {}: {what}", self.line, self.column)
    }
}

/// One CSV record and the line it starts on.
type Record = (usize, Vec<String>);

/// Splits `input` into records like Go's `encoding/csv` reader with `FieldsPerRecord = -1` and
/// every other option at its default.
fn parse_csv(input: &str) -> Result<Vec<Record>, CsvError> {
    let bytes = input.as_bytes();
    let mut records = Vec::new();
    let mut pos = 0;
    let mut line = 1;
    let mut line_start = 0;
    let column = |line_start: usize, at: usize| input[line_start..at].chars().count() + 1;
    while pos < bytes.len() {
        // Empty lines are skipped ("\r\n" counts as a line end, and Go drops a "\r" that ends
        // the input).
        if bytes[pos] == b'\n' || bytes[pos..].starts_with(b"\r\n") || &bytes[pos..] == b"\r" {
            pos += if bytes[pos] == b'\n' { 1 } else { 2 };
            line += 1;
            line_start = pos.min(bytes.len());
            continue;
        }
        let start_line = line;
        let mut fields = Vec::new();
        loop {
            let (field, ended_record) = if bytes.get(pos) == Some(&b'"') {
                pos += 1;
                let mut field = String::new();
                loop {
                    let Some(offset) = input[pos..].find('"') else {
                        // No closing quote before the end of the input.
                        for (i, _) in input[pos..].match_indices('\n') {
                            line += 1;
                            line_start = pos + i + 1;
                        }
                        return Err(CsvError {
                            start_line,
                            line,
                            column: column(line_start, bytes.len()),
                            kind: CsvErrorKind::Quote,
                        });
                    };
                    let chunk = &input[pos..pos + offset];
                    for (i, _) in chunk.match_indices('\n') {
                        line += 1;
                        line_start = pos + i + 1;
                    }
                    field.push_str(&chunk.replace("\r\n", "\n"));
                    pos += offset + 1;
                    match bytes.get(pos) {
                        Some(b'"') => {
                            field.push('"');
                            pos += 1;
                        }
                        Some(b',') => {
                            pos += 1;
                            break (field, false);
                        }
                        Some(b'\n') => {
                            pos += 1;
                            break (field, true);
                        }
                        Some(b'\r') if bytes.get(pos + 1) == Some(&b'\n') => {
                            pos += 2;
                            break (field, true);
                        }
                        None => break (field, true),
                        Some(_) => {
                            return Err(CsvError {
                                start_line,
                                line,
                                column: column(line_start, pos),
                                kind: CsvErrorKind::Quote,
                            })
                        }
                    }
                }
            } else {
                let end = input[pos..].find([',', '\n']).map_or(bytes.len(), |i| pos + i);
                let mut text = &input[pos..end];
                if end == bytes.len() || bytes[end] == b'\n' {
                    text = text.strip_suffix('\r').unwrap_or(text);
                }
                if let Some(quote) = text.find('"') {
                    return Err(CsvError {
                        start_line,
                        line,
                        column: column(line_start, pos + quote),
                        kind: CsvErrorKind::BareQuote,
                    });
                }
                let field = text.to_owned();
                match bytes.get(end) {
                    Some(b',') => {
                        pos = end + 1;
                        (field, false)
                    }
                    _ => {
                        pos = (end + 1).min(bytes.len());
                        (field, true)
                    }
                }
            };
            fields.push(field);
            if ended_record {
                if pos > 0 && bytes.get(pos - 1) == Some(&b'\n') {
                    line += 1;
                    line_start = pos;
                }
                break;
            }
        }
        records.push((start_line, fields));
    }
    Ok(records)
}

/// `--token-auth-file` tokens. Tokens are kept only as SHA-256 digests and looked up by digest,
/// so the lookup's timing depends on a hash of the presented token, not on how many leading
/// bytes it shares with a real one, and a memory dump shows no usable token.
///
/// The authenticator is audience-agnostic: the server wraps it in
/// [`AudienceAgnostic`](crate::token::AudienceAgnostic) with the API audiences, as kube does.
#[derive(Clone, Default)]
pub struct TokenFileAuthenticator {
    tokens: HashMap<[u8; 32], UserInfo>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for TokenFileAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFileAuthenticator").field("tokens", &self.tokens.len()).finish_non_exhaustive()
    }
}

fn token_digest(token: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, token.as_bytes()).as_ref());
    out
}

impl TokenFileAuthenticator {
    /// Reads the file at `path`. Synchronous: meant for startup (or `spawn_blocking`), never the
    /// request path.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, TokenFileError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| TokenFileError::Read { path: name.clone(), source })?;
        Self::parse(&text, &name)
    }

    /// Parses token-file CSV held in memory; errors and warnings name it `<inline>`.
    pub fn from_csv(csv: &str) -> Result<Self, TokenFileError> {
        Self::parse(csv, "<inline>")
    }

    fn parse(csv: &str, path: &str) -> Result<Self, TokenFileError> {
        let mut auth = TokenFileAuthenticator::default();
        let mut record_number = 0;
        for (line, record) in parse_csv(csv).map_err(TokenFileError::Csv)? {
            let found = record.len();
            let mut fields = record.into_iter();
            let (Some(token), Some(name), Some(uid)) = (fields.next(), fields.next(), fields.next()) else {
                return Err(TokenFileError::TooFewColumns { path: path.to_owned(), found, line });
            };
            record_number += 1;
            if token.is_empty() {
                auth.warnings.push(format!(
                    "empty token has been found in token file '{path}', record number '{record_number}'"
                ));
                continue;
            }
            let groups = fields.next().map(|g| g.split(',').map(str::to_owned).collect()).unwrap_or_default();
            let user = UserInfo { name, uid, groups, ..UserInfo::default() };
            if auth.tokens.insert(token_digest(&token), user).is_some() {
                auth.warnings.push(format!(
                    "duplicate token has been found in token file '{path}', record number '{record_number}'"
                ));
            }
        }
        Ok(auth)
    }

    /// What kube would have logged as warnings while reading the file (empty and duplicate
    /// tokens), for the server to log.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// How many distinct tokens are known.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no token is known.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

impl TokenAuthenticator for TokenFileAuthenticator {
    fn authenticate_token(&self, token: &str, _audiences: &[String]) -> TokenOutcome {
        match self.tokens.get(&token_digest(token)) {
            Some(user) => TokenOutcome::Authenticated { user: user.clone(), audiences: Vec::new() },
            None => TokenOutcome::NotApplicable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(auth: &TokenFileAuthenticator, token: &str) -> Option<UserInfo> {
        match auth.authenticate_token(token, &[]) {
            TokenOutcome::Authenticated { user, audiences } => {
                assert!(audiences.is_empty());
                Some(user)
            }
            TokenOutcome::NotApplicable => None,
            TokenOutcome::Rejected(reason) => panic!("unexpected rejection: {reason}"),
        }
    }

    fn expect(name: &str, uid: &str, groups: &[&str]) -> Option<UserInfo> {
        Some(UserInfo {
            name: name.into(),
            uid: uid.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..UserInfo::default()
        })
    }

    #[test]
    fn reads_kube_test_file() {
        // The records of kube's own tokenfile test, plus an empty line in the middle.
        let auth = TokenFileAuthenticator::from_csv(
            "\ntoken1,user1,uid1\ntoken2,user2,uid2\n\ntoken3,user3,uid3,\"group1,group2\"\ntoken4,user4,uid4,\"group2\"\n\
             token5,user5,uid5,group5\ntoken6,user6,uid6,group5,otherdata\ntoken7,user7,uid7,\"group1,group2\",otherdata\n",
        )
        .unwrap();
        assert_eq!(auth.len(), 7);
        assert!(auth.warnings().is_empty());
        assert_eq!(user(&auth, "token1"), expect("user1", "uid1", &[]));
        assert_eq!(user(&auth, "token2"), expect("user2", "uid2", &[]));
        assert_eq!(user(&auth, "token3"), expect("user3", "uid3", &["group1", "group2"]));
        assert_eq!(user(&auth, "token4"), expect("user4", "uid4", &["group2"]));
        assert_eq!(user(&auth, "token5"), expect("user5", "uid5", &["group5"]));
        assert_eq!(user(&auth, "token6"), expect("user6", "uid6", &["group5"]));
        assert_eq!(user(&auth, "token7"), expect("user7", "uid7", &["group1", "group2"]));
        assert_eq!(user(&auth, "token8"), None);
        assert_eq!(user(&auth, ""), None);
        assert_eq!(user(&auth, "token1 "), None);
    }

    #[test]
    fn too_few_columns_fails_the_file() {
        let err = TokenFileAuthenticator::from_csv("token1,user1,uid1\ntoken2,user2,uid2\ntoken3,user3\ntoken4\n")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "token file '<inline>' must have at least 3 columns (token, user name, user uid), found 2"
        );
        assert!(matches!(err, TokenFileError::TooFewColumns { line: 3, found: 2, .. }));
        assert!(TokenFileAuthenticator::from_csv("token4\n").is_err());
        // No comment syntax: a '#' line is a record, and too short.
        assert!(TokenFileAuthenticator::from_csv("# tokens for the lab cluster\n").is_err());
        // But a long enough '#' line is a token like any other.
        let auth = TokenFileAuthenticator::from_csv("#t,u,i\n").unwrap();
        assert_eq!(user(&auth, "#t"), expect("u", "i", &[]));
    }

    #[test]
    fn spaces_are_kept_and_groups_are_not_trimmed() {
        let auth = TokenFileAuthenticator::from_csv(" tok , user ,uid,\"a, b\"\nt2,u2,i2,\n").unwrap();
        assert_eq!(user(&auth, " tok "), expect(" user ", "uid", &["a", " b"]));
        assert_eq!(user(&auth, "tok"), None);
        // An empty groups column is one empty group, as strings.Split gives.
        assert_eq!(user(&auth, "t2"), expect("u2", "i2", &[""]));
    }

    #[test]
    fn empty_and_duplicate_tokens_warn() {
        let auth = TokenFileAuthenticator::from_csv("t,first,1\n,nobody,2\nt,second,3\r\n").unwrap();
        assert_eq!(auth.len(), 1);
        assert_eq!(user(&auth, "t"), expect("second", "3", &[]));
        assert_eq!(
            auth.warnings(),
            [
                "empty token has been found in token file '<inline>', record number '2'",
                "duplicate token has been found in token file '<inline>', record number '3'",
            ]
        );
        assert!(TokenFileAuthenticator::from_csv("").unwrap().is_empty());
    }

    #[test]
    fn quoted_fields_follow_go_csv() {
        let auth =
            TokenFileAuthenticator::from_csv("\"a,b\",\"say \"\"hi\"\"\",\"multi\r\nline\",g1\nlast,u,i").unwrap();
        assert_eq!(user(&auth, "a,b"), expect("say \"hi\"", "multi\nline", &["g1"]));
        assert_eq!(user(&auth, "last"), expect("u", "i", &[]));

        let bare = TokenFileAuthenticator::from_csv("ok,u,i\nto\"k,u,i\n").unwrap_err();
        assert_eq!(bare.to_string(), "parse error on line 2, column 3: bare \" in non-quoted-field");
        let extraneous = TokenFileAuthenticator::from_csv("\"tok\"x,u,i\n").unwrap_err();
        assert_eq!(extraneous.to_string(), "parse error on line 1, column 6: extraneous or missing \" in quoted-field");
        let unterminated = TokenFileAuthenticator::from_csv("a,b,c\n\"tok,u\n,i\n").unwrap_err();
        assert!(matches!(
            unterminated,
            TokenFileError::Csv(CsvError { start_line: 2, line: 4, kind: CsvErrorKind::Quote, .. })
        ));
        assert!(unterminated.to_string().starts_with("record on line 2; parse error on line 4"));
        // A quote opening later in a field is bare, as in Go without LazyQuotes.
        assert!(TokenFileAuthenticator::from_csv(" \"tok\",u,i\n").is_err());
    }

    #[test]
    fn csv_line_numbers_follow_multiline_fields() {
        let records = parse_csv("a,\"x\ny\",c\n\nd,e,f").unwrap();
        assert_eq!(
            records,
            vec![(1, vec!["a".into(), "x\ny".into(), "c".into()]), (4, vec!["d".into(), "e".into(), "f".into()])]
        );
        assert_eq!(parse_csv("a,b,\n").unwrap(), vec![(1, vec!["a".into(), "b".into(), String::new()])]);
        assert_eq!(parse_csv("a,b,c\r").unwrap(), vec![(1, vec!["a".into(), "b".into(), "c".into()])]);
        assert_eq!(parse_csv("a,b,c\n\r").unwrap().len(), 1);
        assert_eq!(parse_csv("a,b\rc\n").unwrap(), vec![(1, vec!["a".into(), "b\rc".into()])]);
    }

    #[test]
    fn load_reads_a_file_and_names_it() {
        let dir = std::env::temp_dir().join(format!("kapi-token-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.csv");
        std::fs::write(&path, "secret,admin,admin-uid,\"system:masters\"\n,x,y\n").unwrap();
        let auth = TokenFileAuthenticator::load(&path).unwrap();
        assert_eq!(user(&auth, "secret"), expect("admin", "admin-uid", &["system:masters"]));
        assert!(auth.warnings()[0].contains(&path.display().to_string()));
        std::fs::remove_dir_all(&dir).unwrap();
        let missing = TokenFileAuthenticator::load(dir.join("missing.csv")).unwrap_err();
        assert!(matches!(missing, TokenFileError::Read { .. }));
    }
}
