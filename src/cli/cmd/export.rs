//! `export`: write complete trajectories of one Catalog Snapshot in an
//! exchange format (the work is `ingest::export`).

use crate::cli::out::Out;
use crate::cli::settings::ExportSettings;
use crate::cli::ExitStatus;
use crate::error::Error;

/// Run the command.
pub fn run(s: &ExportSettings, out: &mut Out) -> Result<ExitStatus, Error> {
    let mut stdout = Vec::new();
    crate::ingest::export::export(s, out, &mut stdout)?;
    out.write_bytes(&stdout)?;
    Ok(ExitStatus::Success)
}
