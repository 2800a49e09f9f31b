//! Where exported records go, one at a time: memory holds a record, never
//! the output.
//!
//! Records are written as JSON Lines as they come: into a hidden temporary
//! file beside `--output` (published by one rename or link at the end), to
//! stdout with `--stream`, or, for stdout without `--stream`, into an
//! unlinked spool file that is copied out at the end, so that a failed
//! export prints nothing. Without `--stream` a single record is written as
//! one pretty document instead, so the first record is held until a second
//! one shows there will be lines.

use std::fs::File;
use std::io::{BufWriter, Seek as _, Write};
use std::path::PathBuf;

use super::{check_replaceable, ExportError};
use crate::ingest::{ExportOptions, IngestError as Error};
use crate::util::interrupt;

/// Where the lines are written.
enum Target<'a> {
    /// `--stream` to stdout: written as produced.
    Stdout,
    /// Stdout without `--stream`: a spool copied to `stdout` at the end.
    Spool(File, &'a mut dyn Write),
    /// `--output`: the temporary file beside it, published at the end.
    File {
        tmp: PathBuf,
        dst: PathBuf,
        overwrite: bool,
        file: File,
    },
    /// Published or failed: nothing left to clean.
    Done,
}

/// The exported records' destination.
pub(super) struct Sink<'a> {
    lines: BufWriter<Box<dyn Write + 'a>>,
    target: Target<'a>,
    /// Without `--stream`: the first record, while it may be the only one.
    held: Option<serde_json::Value>,
    stream: bool,
    n: u64,
}

impl<'a> Sink<'a> {
    /// Open the destination `s` names (refusing an existing `--output`
    /// before anything is read).
    pub(super) fn open(s: &ExportOptions, stdout: &'a mut dyn Write) -> Result<Self, Error> {
        let (w, target): (Box<dyn Write + 'a>, Target<'a>) = match (&s.output, s.stream) {
            (None, true) => (Box::new(stdout), Target::Stdout),
            (None, false) => {
                let f = spool().map_err(|e| ExportError::Io(format!("cannot spool: {e}")))?;
                let w = f.try_clone().map_err(|e| ExportError::Io(e.to_string()))?;
                (Box::new(w), Target::Spool(f, stdout))
            }
            (Some(p), _) => {
                if !s.overwrite && std::fs::symlink_metadata(p).is_ok() {
                    return Err(ExportError::OutputExists(p.display().to_string()).into());
                }
                if s.overwrite {
                    check_replaceable(p)?;
                }
                let dir = p
                    .parent()
                    .ok_or_else(|| ExportError::Io("no parent directory".into()))?;
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
                interrupt::remove_on_interrupt(&tmp);
                let opened = File::create(&tmp).and_then(|f| Ok((f.try_clone()?, f)));
                let (w, file) = opened.map_err(|e| {
                    interrupt::settle(&tmp, || std::fs::remove_file(&tmp).ok());
                    ExportError::Io(e.to_string())
                })?;
                let target = Target::File {
                    tmp,
                    dst: p.clone(),
                    overwrite: s.overwrite,
                    file,
                };
                (Box::new(w), target)
            }
        };
        Ok(Sink {
            lines: BufWriter::with_capacity(1 << 16, w),
            target,
            held: None,
            stream: s.stream,
            n: 0,
        })
    }

    /// Write one record.
    pub(super) fn record(&mut self, v: serde_json::Value) -> Result<(), Error> {
        self.n += 1;
        if !self.stream && self.n == 1 {
            self.held = Some(v);
            return Ok(());
        }
        if let Some(first) = self.held.take() {
            self.line(&first)?;
        }
        self.line(&v)
    }

    fn line(&mut self, v: &serde_json::Value) -> Result<(), Error> {
        serde_json::to_writer(&mut self.lines, v).map_err(|e| Error::Output(e.into()))?;
        self.lines.write_all(b"\n").map_err(Error::Output)
    }

    /// Finish the output and publish it; returns the records written.
    pub(super) fn finish(mut self) -> Result<u64, Error> {
        if let Some(only) = self.held.take() {
            serde_json::to_writer_pretty(&mut self.lines, &only)
                .map_err(|e| Error::Output(e.into()))?;
            self.lines.write_all(b"\n").map_err(Error::Output)?;
        }
        self.lines.flush().map_err(Error::Output)?;
        self.lines = BufWriter::new(Box::new(std::io::sink()));
        match std::mem::replace(&mut self.target, Target::Done) {
            Target::Stdout | Target::Done => {}
            Target::Spool(mut f, stdout) => {
                f.rewind().map_err(Error::Output)?;
                std::io::copy(&mut f, stdout).map_err(Error::Output)?;
            }
            Target::File {
                tmp,
                dst,
                overwrite,
                file,
            } => publish(&tmp, &dst, overwrite, &file)?,
        }
        Ok(self.n)
    }
}

impl Drop for Sink<'_> {
    /// A failed export leaves no temporary file behind.
    fn drop(&mut self) {
        if let Target::File { tmp, .. } = &self.target {
            interrupt::settle(tmp, || std::fs::remove_file(tmp).ok());
        }
    }
}

/// Move the finished temporary file to `dst`: a rename with `--overwrite`
/// (checked again right before it: the path may have changed meanwhile),
/// a link otherwise, which fails rather than replace a file that appeared
/// during the export.
fn publish(
    tmp: &std::path::Path,
    dst: &std::path::Path,
    overwrite: bool,
    file: &File,
) -> Result<(), Error> {
    let synced = file.sync_all();
    let replaceable = if overwrite {
        check_replaceable(dst)
    } else {
        Ok(())
    };
    let r = interrupt::settle(tmp, || {
        let r = synced.and_then(|()| match &replaceable {
            Ok(()) if overwrite => std::fs::rename(tmp, dst),
            Ok(()) => std::fs::hard_link(tmp, dst),
            Err(_) => Ok(()),
        });
        let _ = std::fs::remove_file(tmp);
        r
    });
    replaceable?;
    r.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            ExportError::OutputExists(dst.display().to_string()).into()
        } else {
            ExportError::Io(e.to_string()).into()
        }
    })
}

/// An anonymous file in the temporary directory: created, then unlinked at
/// once, so nothing is left whatever happens to the process.
fn spool() -> std::io::Result<File> {
    let dir = std::env::temp_dir();
    for attempt in 0u32.. {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            ".pchronicle-export-{}-{nanos}-{attempt}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => {}
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns")
}
