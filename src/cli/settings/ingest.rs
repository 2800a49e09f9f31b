//! `import` and `export` settings: flags into `ingest` options.

use super::{
    default_warehouse, default_warehouse_dir, discovery, positive, DatasetUri, Env, ExportArgs,
    ExportFormatArg, ExportSettings, ImportArgs, ImportInput, ImportSettings, InputFormatArg, Path,
    SettingsError,
};

pub(super) fn export_settings(
    a: &ExportArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<ExportSettings, SettingsError> {
    let (limits, errors_strict) = discovery(&a.discovery)?;
    let dataset = match &a.from {
        Some(u) => DatasetUri::parse(u, &env.cwd)?,
        None => default_warehouse(env, settings_path)?,
    };
    if let Some(src) = &a.source {
        crate::util::path::check_dataset_relative(src).map_err(|reason| {
            crate::catalog::CatalogError::InvalidSourcePath {
                given: crate::util::text::escape_control(src).into_owned(),
                reason,
            }
        })?;
    }
    let output = match a.output.as_str() {
        "-" => None,
        "" => {
            return Err(SettingsError::InvalidValue {
                flag: "--output",
                reason: "empty path".into(),
            })
        }
        p => Some(crate::util::path::lexical_absolute(Path::new(p), &env.cwd)),
    };
    use crate::formats::ExportFormat as F;
    let format = match a.format {
        ExportFormatArg::Atif => F::Atif,
        ExportFormatArg::Actf => F::Actf,
        ExportFormatArg::OpenaiMessages => F::OpenAiMessages,
        ExportFormatArg::Storyline => F::Storyline,
    };
    Ok(ExportSettings {
        dataset,
        output,
        format,
        source: a.source.clone(),
        run_id: a.run_id.clone(),
        session_id: a.session_id.clone(),
        where_: a.where_.clone(),
        strict: a.strict,
        stream: a.stream,
        overwrite: a.overwrite,
        errors_strict,
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        limits,
    })
}

pub(super) fn import_settings(
    a: &ImportArgs,
    env: &Env,
    settings_path: Option<&Path>,
) -> Result<ImportSettings, SettingsError> {
    use crate::formats::SourceFormat as F;
    let format = match a.format {
        InputFormatArg::Auto => None,
        InputFormatArg::Atif => Some(F::Atif),
        InputFormatArg::Actf => Some(F::Actf),
        InputFormatArg::OpenaiMessages => Some(F::OpenAiMessages),
        InputFormatArg::Storyline => Some(F::Storyline),
    };
    let input = if a.from == "-" {
        if !a.stream {
            return Err(SettingsError::InvalidValue {
                flag: "--from",
                reason: "reading stdin (`--from -`) needs --stream".into(),
            });
        }
        if format.is_none() {
            return Err(SettingsError::InvalidValue {
                flag: "--format",
                reason: "reading stdin needs an explicit --format".into(),
            });
        }
        ImportInput::Stdin
    } else {
        if a.from.trim().is_empty() {
            return Err(SettingsError::InvalidValue {
                flag: "--from",
                reason: "empty path".into(),
            });
        }
        if a.from.contains("://") && !a.from.starts_with("file://") {
            if let uri @ DatasetUri::S3(_) = DatasetUri::parse(&a.from, &env.cwd)? {
                return Err(crate::catalog::CatalogError::S3NotSupported {
                    uri: uri.to_string(),
                    what: "importing from S3",
                }
                .into());
            }
        }
        ImportInput::Path(crate::util::path::lexical_absolute(
            Path::new(&a.from),
            &env.cwd,
        ))
    };
    let mut s3_target = None;
    let target = match &a.output {
        Some(o) => match DatasetUri::parse(o, &env.cwd)? {
            DatasetUri::Local(p) => p,
            DatasetUri::S3(uri) => {
                if uri.prefix().is_empty() {
                    return Err(SettingsError::InvalidValue {
                        flag: "--output",
                        reason: "an S3 Dataset to create needs a prefix (`s3://bucket/name`), not a whole bucket".into(),
                    });
                }
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                s3_target = Some(uri);
                std::env::temp_dir()
                    .join(format!("pchronicle-import-{}-{nanos}", std::process::id()))
                    .join("store")
            }
        },
        None => {
            let wh = default_warehouse_dir(env, settings_path).map_err(|e| match e {
                SettingsError::NoDataset => SettingsError::InvalidValue {
                    flag: "--output",
                    reason:
                        "give --output, or set a default Warehouse with `pchronicle default DIR`"
                            .into(),
                },
                other => other,
            })?;
            let ImportInput::Path(p) = &input else {
                return Err(SettingsError::InvalidValue {
                    flag: "--output",
                    reason: "importing stdin needs --output".into(),
                });
            };
            let stem: String = p
                .file_stem()
                .map_or_else(|| "import".into(), |s| s.to_string_lossy().into_owned())
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let tag = blake3::hash(p.display().to_string().as_bytes()).to_hex();
            wh.join(format!("{}-{}", stem.trim_matches('-'), &tag[..8]))
        }
    };
    Ok(ImportSettings {
        input,
        target,
        s3_target,
        format,
        max_input_bytes: positive("--max-input-bytes", a.max_input_bytes)?,
        max_document_bytes: positive("--max-document-bytes", a.max_document_bytes)?,
        max_files: positive("--max-files", a.max_files)?,
    })
}
