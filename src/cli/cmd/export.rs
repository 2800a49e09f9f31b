//! `export`: write complete trajectories of one Catalog Snapshot in an
//! exchange format (the work is `ingest::export`).

use crate::cli::out::Out;
use crate::cli::settings::ExportSettings;
use crate::cli::ExitStatus;
use crate::error::Error;

/// Run the command.
pub fn run(s: &ExportSettings, out: &mut Out) -> Result<ExitStatus, Error> {
    // Records go straight to stdout: the export bounds its own memory and
    // writes nothing there when it fails.
    let mut stdout = std::io::stdout().lock();
    crate::ingest::export::export(s, out, &mut stdout)?;
    Ok(ExitStatus::Success)
}
