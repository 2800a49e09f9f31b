//! Build script: records the list of embedded web assets (none yet) and the
//! build's git revision for `--version` output.

fn main() {
    println!("cargo:rerun-if-changed=assets");
    println!("cargo:rerun-if-changed=build.rs");
}
