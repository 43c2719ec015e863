//! `kapi-aggregator`: the aggregator tier alone, the front door of a split deployment. It
//! authenticates and authorizes every request, proxies built-in groups to `--core-url`, the
//! other groups to `--extensions-url` and APIService groups to their services, with the
//! caller's identity under its front-proxy client certificate, and merges discovery.

fn main() -> std::process::ExitCode {
    kapi::main(kapi::Server::Aggregator)
}
