//! The options of the pod connect subresources, read from the query as kube's parameter codec
//! reads `PodLogOptions`, `PodExecOptions`, `PodAttachOptions` and `PodPortForwardOptions`
//! (first value wins, lenient booleans, Go's integer errors, exec and attach defaulting), and
//! the kubelet query each becomes (`pkg/registry/core/pod/strategy.go`).

use kapi_apimachinery::{ApiError, Cause};
use serde_json::Value;
use time::OffsetDateTime;

use crate::query::Query;

/// Which subresource, with its decoded options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectOptions {
    /// `pods/log`.
    Log(LogOptions),
    /// `pods/exec` (with a command).
    Exec(StreamOptions),
    /// `pods/attach` (the command is ignored).
    Attach(StreamOptions),
    /// `pods/portforward`: the `ports` asked for.
    PortForward(Vec<u16>),
}

/// kube's `PodLogOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: String,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    pub since_time: Option<OffsetDateTime>,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
    pub insecure_skip_tls_verify_backend: bool,
}

/// kube's `PodExecOptions` / `PodAttachOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub container: String,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
    pub command: Vec<String>,
}

impl ConnectOptions {
    /// Decodes the options of `subresource` from the query; a value that does not convert is
    /// kube's 400 with the converter's error text.
    pub fn parse(subresource: &str, query: &Query) -> Result<Self, ApiError> {
        Ok(match subresource {
            "log" => Self::Log(LogOptions::parse(query)?),
            "exec" => Self::Exec(StreamOptions::parse(query, true)),
            "attach" => Self::Attach(StreamOptions::parse(query, false)),
            "portforward" => Self::PortForward(ports(query)?),
            other => return Err(ApiError::bad_request(format!("unknown connect subresource {other:?}"))),
        })
    }

    /// The container named in the options (empty: the pod's only one), for log, exec, attach.
    pub fn container(&self) -> Option<&str> {
        match self {
            Self::Log(o) => Some(&o.container),
            Self::Exec(o) | Self::Attach(o) => Some(&o.container),
            Self::PortForward(_) => None,
        }
    }

    /// The query the kubelet gets, encoded as Go's `url.Values.Encode` (keys sorted).
    pub fn kubelet_query(&self) -> String {
        let flag = |on: bool, key: &'static str, value: &'static str| on.then(|| (key, value.to_owned()));
        let mut pairs: Vec<(&'static str, String)> = match self {
            Self::Log(o) => [
                flag(o.follow, "follow", "true"),
                flag(o.previous, "previous", "true"),
                flag(o.timestamps, "timestamps", "true"),
                o.since_seconds.map(|s| ("sinceSeconds", s.to_string())),
                o.since_time.map(|t| ("sinceTime", kapi_apimachinery::time::format_rfc3339(t))),
                o.tail_lines.map(|n| ("tailLines", n.to_string())),
                o.limit_bytes.map(|n| ("limitBytes", n.to_string())),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Self::Exec(o) | Self::Attach(o) => {
                let mut pairs: Vec<_> =
                    [flag(o.stdin, "input", "1"), flag(o.stdout, "output", "1"), flag(o.stderr, "error", "1"), flag(o.tty, "tty", "1")]
                        .into_iter()
                        .flatten()
                        .collect();
                if matches!(self, Self::Exec(_)) {
                    pairs.extend(o.command.iter().map(|c| ("command", c.clone())));
                }
                pairs
            }
            Self::PortForward(ports) if ports.is_empty() => Vec::new(),
            Self::PortForward(ports) => vec![("port", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(","))],
        };
        // Stable: repeated keys (`command`) keep their order, as Go's encoder does.
        pairs.sort_by_key(|(k, _)| *k);
        pairs.iter().map(|(k, v)| format!("{k}={}", query_escape(v))).collect::<Vec<_>>().join("&")
    }
}

impl LogOptions {
    fn parse(query: &Query) -> Result<Self, ApiError> {
        // The generated converter's field order decides which bad value is reported.
        Ok(Self {
            container: query.get("container").unwrap_or_default().to_owned(),
            follow: go_bool(query, "follow"),
            previous: go_bool(query, "previous"),
            since_seconds: go_int64(query, "sinceSeconds")?,
            since_time: go_time(query, "sinceTime")?,
            timestamps: go_bool(query, "timestamps"),
            tail_lines: go_int64(query, "tailLines")?,
            limit_bytes: go_int64(query, "limitBytes")?,
            insecure_skip_tls_verify_backend: go_bool(query, "insecureSkipTLSVerifyBackend"),
        })
    }

    /// kube's `ValidatePodLogOptions`, as `PodLogOptions "<pod>" is invalid: ...` (422).
    pub fn validate(&self, pod: &str) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            causes.push(Cause::invalid("tailLines", &Value::from(n), "must be greater than or equal to 0"));
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            causes.push(Cause::invalid("limitBytes", &Value::from(n), "must be greater than 0"));
        }
        match (self.since_seconds, self.since_time) {
            (Some(_), Some(_)) => causes.push(Cause::forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified")),
            (Some(s), None) if s < 1 => causes.push(Cause::invalid("sinceSeconds", &Value::from(s), "must be greater than 0")),
            _ => {}
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid("", "PodLogOptions", pod, causes))
        }
    }
}

impl StreamOptions {
    fn parse(query: &Query, with_command: bool) -> Self {
        let mut options = Self {
            container: query.get("container").unwrap_or_default().to_owned(),
            stdin: go_bool(query, "stdin"),
            stdout: go_bool(query, "stdout"),
            stderr: go_bool(query, "stderr"),
            tty: go_bool(query, "tty"),
            command: if with_command { query.all("command").into_iter().map(str::to_owned).collect() } else { Vec::new() },
        };
        // kube's codec defaults the decoded options, and `SetDefaults_PodExecOptions` (and
        // the attach one) turn stdout and stderr on whatever was asked; a request without
        // any parameter is not decoded, hence not defaulted.
        if !query.is_empty() {
            options.stdout = true;
            options.stderr = true;
        }
        options
    }
}

/// kube's `Convert_Slice_string_To_bool`: only absent, `0` and `false` (any case) are false.
fn go_bool(query: &Query, key: &str) -> bool {
    query.get(key).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// kube's `Convert_Slice_string_To_Pointer_int64`, with Go's `strconv.ParseInt` errors.
fn go_int64(query: &Query, key: &str) -> Result<Option<i64>, ApiError> {
    let Some(v) = query.get(key) else { return Ok(None) };
    v.parse::<i64>().map(Some).map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
            _ => "invalid syntax",
        };
        ApiError::bad_request(format!("strconv.ParseInt: parsing {v:?}: {why}"))
    })
}

/// `metav1.Time`'s query form: RFC 3339; empty and `null` mean unset.
fn go_time(query: &Query, key: &str) -> Result<Option<OffsetDateTime>, ApiError> {
    match query.get(key) {
        None | Some("" | "null") => Ok(None),
        Some(v) => kapi_apimachinery::time::parse_rfc3339(v)
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(format!("parsing time {v:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {v:?} as RFC 3339"))),
    }
}

/// kube's `Convert_Slice_string_To_Slice_int32` for `ports`: comma lists, 16-bit values.
fn ports(query: &Query) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    for value in query.all("ports") {
        for p in value.split(',') {
            let port = p.parse::<u16>().map_err(|e| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow => "value out of range",
                    _ => "invalid syntax",
                };
                ApiError::bad_request(format!("cannot convert to []int32: strconv.ParseUint: parsing {p:?}: {why}"))
            })?;
            ports.push(port);
        }
    }
    Ok(ports)
}

/// Go's `url.QueryEscape`: unreserved bytes stay, space is `+`, the rest `%XX`.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(b)),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(raw: &str) -> Query {
        Query::parse(Some(raw))
    }

    #[test]
    fn exec_options_are_defaulted_and_encoded_as_kube_sends_them_to_the_kubelet() {
        let exec = ConnectOptions::parse("exec", &q("command=sh&command=-c&command=echo+a%26b&stdout=false&stdin=yes&container=app")).unwrap();
        let ConnectOptions::Exec(o) = &exec else { panic!("{exec:?}") };
        assert_eq!((o.stdin, o.stdout, o.stderr, o.tty), (true, true, true, false), "stdout and stderr are defaulted on");
        assert_eq!(exec.container(), Some("app"));
        assert_eq!(exec.kubelet_query(), "command=sh&command=-c&command=echo+a%26b&error=1&input=1&output=1");
        let bare = ConnectOptions::parse("exec", &q("")).unwrap();
        assert_eq!(bare.kubelet_query(), "", "no parameters: nothing decoded, nothing defaulted");
        let attach = ConnectOptions::parse("attach", &q("command=ignored&tty=TRUE&stdin=0")).unwrap();
        assert_eq!(attach.kubelet_query(), "error=1&output=1&tty=1");
    }

    #[test]
    fn log_options_convert_validate_and_encode() {
        let log = ConnectOptions::parse("log", &q("follow=1&tailLines=2&sinceTime=2024-05-01T10:00:00%2B02:00&timestamps=false")).unwrap();
        assert_eq!(log.kubelet_query(), "follow=true&sinceTime=2024-05-01T08%3A00%3A00Z&tailLines=2");
        let err = ConnectOptions::parse("log", &q("tailLines=x")).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (400, "strconv.ParseInt: parsing \"x\": invalid syntax"));
        let err = ConnectOptions::parse("log", &q("limitBytes=99999999999999999999")).unwrap_err();
        assert_eq!(err.message, "strconv.ParseInt: parsing \"99999999999999999999\": value out of range");

        let ConnectOptions::Log(bad) = ConnectOptions::parse("log", &q("tailLines=-1&limitBytes=0&sinceSeconds=0")).unwrap() else { panic!() };
        let err = bad.validate("web").unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "PodLogOptions \"web\" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0, \
             limitBytes: Invalid value: 0: must be greater than 0, sinceSeconds: Invalid value: 0: must be greater than 0]"
        );
        let ConnectOptions::Log(both) = ConnectOptions::parse("log", &q("sinceSeconds=5&sinceTime=2024-05-01T10:00:00Z")).unwrap() else { panic!() };
        assert_eq!(
            both.validate("web").unwrap_err().message,
            "PodLogOptions \"web\" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
        );
    }

    #[test]
    fn portforward_ports_are_comma_lists_of_16_bit_numbers() {
        let pf = ConnectOptions::parse("portforward", &q("ports=80,443&ports=8080")).unwrap();
        assert_eq!(pf, ConnectOptions::PortForward(vec![80, 443, 8080]));
        assert_eq!(pf.kubelet_query(), "port=80%2C443%2C8080");
        let err = ConnectOptions::parse("portforward", &q("ports=70000")).unwrap_err();
        assert_eq!(err.message, "cannot convert to []int32: strconv.ParseUint: parsing \"70000\": value out of range");
    }
}
