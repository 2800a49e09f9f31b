//! `default [DIRECTORY]`: set or print the default Warehouse.

use std::path::Path;

use crate::catalog::{CatalogError, DatasetUri};
use crate::cli::out::Out;
use crate::cli::settings::{SettingsError, UserSettings};
use crate::cli::{ExitStatus, Settings};
use crate::error::Error;

pub fn run(settings: &Settings, set: Option<&Path>, out: &mut Out) -> Result<ExitStatus, Error> {
    let path = settings
        .settings_path
        .as_deref()
        .ok_or(SettingsError::NoSettingsLocation)?;
    let mut user = UserSettings::load(path)?;
    let Some(dir) = set else {
        return if let Some(w) = &user.default_warehouse {
            if out.json() {
                out.write_json(
                    &serde_json::json!({ "default_warehouse": w, "settings_file": path }),
                )?;
            } else {
                out.write_text(&format!("{w}\n"))?;
            }
            Ok(ExitStatus::Success)
        } else {
            if out.json() {
                out.write_json(
                    &serde_json::json!({ "default_warehouse": null, "settings_file": path }),
                )?;
            }
            out.info("no default Warehouse is set; set one with `pchronicle default DIR`");
            Ok(ExitStatus::NothingFound)
        };
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(CatalogError::NotADirectory {
                uri: dir.display().to_string(),
            }
            .into())
        }
        Err(_) => {
            std::fs::create_dir_all(dir).map_err(|e| CatalogError::CreateDir {
                path: dir.display().to_string(),
                reason: e.to_string(),
            })?;
            out.info(&format!("created {}", dir.display()));
        }
    }
    // Normalise again now that the directory exists (symlinks resolved).
    let normal = DatasetUri::normalise_local(dir, Path::new("/"));
    let normal = normal.display().to_string();
    user.default_warehouse = Some(normal.clone());
    user.save(path)?;
    if out.json() {
        out.write_json(&serde_json::json!({ "default_warehouse": normal, "settings_file": path }))?;
    } else {
        out.write_text(&format!("{normal}\n"))?;
    }
    out.info(&format!("default Warehouse set in {}", path.display()));
    Ok(ExitStatus::Success)
}
