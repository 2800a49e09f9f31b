//! `import --from … [--output …]`: create a Storyline Lance store from
//! exchange files (the work is `ingest::import`); prints its report.

use crate::cli::out::Out;
use crate::cli::settings::ImportSettings;
use crate::cli::ExitStatus;
use crate::error::Error;

/// Run the command.
pub fn run(s: &ImportSettings, out: &mut Out) -> Result<ExitStatus, Error> {
    let report = crate::ingest::import::import(s, out)?;
    out.write_json(&report)?;
    Ok(ExitStatus::Success)
}
