//! The user settings file (`pchronicle default` writes it): the default
//! Warehouse and the S3 policy, read and written whole.

use super::{Path, SettingsError};

/// The user settings file.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSettings {
    /// Absolute, normalised path of the default Warehouse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_warehouse: Option<String>,
    /// S3 endpoints that may be reached although not public (host, IP or
    /// CIDR), added to `--s3-allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub s3_allow: Vec<String>,
    /// Allow plain HTTP to allowed S3 endpoints off loopback.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub s3_allow_http: bool,
    /// Follow S3 redirects (every hop re-validated, credentials dropped
    /// across origins).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub s3_follow_redirects: bool,
}

impl UserSettings {
    /// Load from `path`; a missing file is empty settings.
    pub fn load(path: &Path) -> Result<Self, SettingsError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(SettingsError::Read {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse and check the text of a settings file read from `path`.
    pub fn parse(text: &str, path: &str) -> Result<Self, SettingsError> {
        let s: UserSettings = toml::from_str(text).map_err(|e| SettingsError::Invalid {
            path: path.to_string(),
            reason: e.message().to_string(),
        })?;
        if let Some(w) = &s.default_warehouse {
            if !Path::new(w).is_absolute() {
                return Err(SettingsError::Invalid {
                    path: path.to_string(),
                    reason: "default_warehouse must be an absolute path".into(),
                });
            }
        }
        Ok(s)
    }

    /// The TOML text `save` writes (without its comment line).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// Write atomically (temporary file + rename) to `path`.
    pub fn save(&self, path: &Path) -> Result<(), SettingsError> {
        let err = |e: std::io::Error| SettingsError::Write {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let text = self.to_toml().map_err(|e| SettingsError::Write {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, format!("# pChronicle user settings\n{text}")).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })
    }
}
