//! `kapi`: aggregator, core and extensions tiers in one process on embedded SQLite.

fn main() -> std::process::ExitCode {
    kapi::main(kapi::Server::AllInOne)
}
