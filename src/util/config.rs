//! Reading a configuration file the operator names (warehouse.toml,
//! gateway.toml): bounded, regular files only.

use std::path::Path;

/// Largest configuration file accepted.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of a server configuration file: a regular file of at most
/// [`MAX_CONFIG_BYTES`]; the error is the reason, for the caller's code.
pub fn read_config_file(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(format!("larger than {MAX_CONFIG_BYTES} bytes"));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))
}
