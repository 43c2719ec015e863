//! Looking for plaintext where it must not be: every byte kapi wrote under a data directory.

use std::path::Path;

/// Every byte kapi has written under its data directory (database, WAL, anything else).
pub fn data_bytes(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                all.extend(std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    all
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}
