//! What long work tells the person running it, apart from its result:
//! information, warnings with their codes, and progress. Library code
//! reports through [`Notes`]; the command line prints it on stderr.

/// A progress indicator for one piece of work.
pub trait Progress {
    /// Report the current count.
    fn tick(&mut self, done: u64, total: Option<u64>);
    /// The work is over: clear the indicator.
    fn finish(&mut self);
}

/// Where library code reports to.
pub trait Notes {
    /// An informational line.
    fn info(&self, msg: &str);
    /// A warning with its stable code.
    fn warn(&self, code: &str, msg: &str);
    /// A progress indicator labelled `label`.
    fn progress(&self, label: &'static str) -> Box<dyn Progress + '_>;
    /// The Catalog Snapshot the work reads (every read reports its id).
    fn snapshot(&self, dataset_uri: &str, snapshot_id: &str) {
        let _ = dataset_uri;
        self.info(&format!("snapshot_id: {snapshot_id}"));
    }
}
