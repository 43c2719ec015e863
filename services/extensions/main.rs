//! `kapi-extensions`: the extensions tier alone (CRDs and custom resources), behind
//! kapi-aggregator in a split deployment; it trusts the aggregator's identity headers.

fn main() -> std::process::ExitCode {
    kapi::main(kapi::Server::Extensions)
}
