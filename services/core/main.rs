//! `kapi-core`: the core tier alone (kube-apiserver's built-in groups), behind kapi-aggregator
//! in a split deployment; it trusts the aggregator's identity headers (`--requestheader-*`).

fn main() -> std::process::ExitCode {
    kapi::main(kapi::Server::Core)
}
