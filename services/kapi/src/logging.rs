//! kube-apiserver's logging flags: `-v` (klog verbosity: 0-2 the usual lines, 3 adds one line
//! per HTTP request, 4-5 debug detail, 6 and up everything) and `--logging-format` (`text`, or
//! `json` in the shape of kube's JSON logs: `ts`, `caller`, `msg`, `v` and the line's fields,
//! one object a line, so that log pipelines built for kube-apiserver read kapi's).

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The tracing filter for a verbosity, when `--log-level` does not give one.
pub fn filter_for(verbosity: u8) -> &'static str {
    match verbosity {
        0..=3 => "info",
        4..=5 => "info,kapi_server=debug,kapi_registry=debug,kapi_watch=debug,kapi_storage=debug",
        _ => "debug",
    }
}

/// Installs the subscriber.
pub fn init(format: &str, filter: tracing_subscriber::EnvFilter) -> Result<(), String> {
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        "text" => builder.init(),
        "json" => builder.event_format(KubeJson).init(),
        other => return Err(format!("--logging-format: unsupported format {other:?}, supported formats are \"json\", \"text\"")),
    }
    Ok(())
}

/// kube's JSON log line.
struct KubeJson;

impl<S, N> FormatEvent<S, N> for KubeJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let mut line = Map::new();
        line.insert("ts".into(), Value::from(now.as_secs_f64()));
        if let (Some(file), Some(number)) = (meta.file(), meta.line()) {
            let short = file.rsplit('/').take(2).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("/");
            line.insert("caller".into(), Value::from(format!("{short}:{number}")));
        }
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let msg = fields.0.remove("message").unwrap_or(Value::from(""));
        line.insert("msg".into(), msg);
        // klog's JSON: errors carry `err`, the others their verbosity.
        match *meta.level() {
            Level::ERROR => {
                if let Some(err) = fields.0.remove("error") {
                    line.insert("err".into(), err);
                }
            }
            level => {
                let v = match level {
                    Level::DEBUG => 4,
                    Level::TRACE => 6,
                    _ => 0,
                };
                line.insert("v".into(), Value::from(v));
            }
        }
        for (k, v) in fields.0 {
            line.entry(k).or_insert(v);
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// The fields of one event as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
}

#[cfg(test)]
mod tests {
    use super::filter_for;

    #[test]
    fn verbosity_maps_to_filters() {
        assert_eq!(filter_for(0), "info");
        assert_eq!(filter_for(3), "info");
        assert!(filter_for(4).contains("kapi_server=debug"));
        assert_eq!(filter_for(9), "debug");
    }
}
