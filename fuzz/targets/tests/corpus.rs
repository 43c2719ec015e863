//! The kept corpus as ordinary tests: every file of `fuzz/corpus/<target>/` (the seeds and
//! every input that ever crashed a target) runs through its target on the stable toolchain,
//! so a regression fails `cargo nextest` without libFuzzer.

use std::path::{Path, PathBuf};

use kapi_fuzz_targets::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs every file of the target's corpus; names the file that fails.
fn replay(name: &str) {
    let (_, body) = TARGETS.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no target {name}"));
    let dir = fuzz_dir().join("corpus").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.map(|e| e.path()).unwrap_or_else(|e| panic!("{}: {e}", dir.display())))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{}: a corpus of {} files", dir.display(), files.len());
    for file in files {
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if std::panic::catch_unwind(|| body(&data)).is_err() {
            panic!("{name} fails on {}", file.display());
        }
    }
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test] fn $name() { replay(stringify!($name)); })*

        /// The list above, the library's table and the libFuzzer binaries name the same targets.
        #[test]
        fn every_target_is_replayed_and_has_a_libfuzzer_binary() {
            let replayed = [$(stringify!($name)),*];
            let table: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
            assert_eq!(table, replayed);
            let manifest = std::fs::read_to_string(fuzz_dir().join("libfuzzer/Cargo.toml")).unwrap_or_default();
            for name in table {
                assert!(manifest.contains(&format!("name = \"{name}\"")), "fuzz/libfuzzer/Cargo.toml has no [[bin]] {name}");
                let source = fuzz_dir().join(format!("libfuzzer/fuzz_targets/{name}.rs"));
                let body = std::fs::read_to_string(&source).unwrap_or_default();
                assert!(body.contains(&format!("::{name}(data)")), "{} does not call {name}", source.display());
            }
        }
    };
}

replay_tests!(
    decode_json,
    decode_yaml,
    protobuf_object,
    protobuf_watch,
    label_selector,
    field_selector,
    resource_version,
    continue_token,
    go_duration,
    quantity,
    json_patch,
    merge_patch,
    strategic_merge_patch,
    server_side_apply,
    fields_v1,
    media_type,
    cel,
);
