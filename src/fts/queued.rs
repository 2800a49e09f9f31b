//! A bound on the documents waiting for tantivy's indexing threads.
//!
//! tantivy queues up to 10,000 documents between `add_document` and its
//! indexing threads, and the rows of a store are read far faster than the
//! threads segment their text, so that queue stays full. At about 3 KB of
//! owned text per step it held some 30 MB. Each document here carries its
//! size and gives it back when tantivy drops it, after indexing; the writer
//! waits while more than [`MAX_QUEUED_BYTES`] are out.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tantivy::{Document, TantivyDocument};

/// Bytes of text handed to tantivy and not yet indexed, above which
/// [`Gauge::wait`] blocks. Enough for a few hundred steps per thread.
pub const MAX_QUEUED_BYTES: usize = 4 << 20;

/// How long a writer sleeps before it looks at the gauge again. Indexing a
/// step takes tens of microseconds, so the queue never runs dry in between.
const POLL: Duration = Duration::from_micros(500);

/// How long [`Gauge::wait`] waits for a document to come back. A thread
/// writing out its segment gives none back for a second or two.
const STALLED: Duration = Duration::from_secs(10);

/// The bytes out with tantivy (and, for tests, the most there were at once).
#[derive(Default)]
pub struct Gauge {
    out: Arc<AtomicUsize>,
    #[cfg(test)]
    most: AtomicUsize,
}

impl Gauge {
    /// Wrap `doc`, of about `bytes` bytes, counting it until it is dropped.
    pub fn queue(&self, doc: TantivyDocument, bytes: usize) -> Queued {
        self.out.fetch_add(bytes, Ordering::Relaxed);
        #[cfg(test)]
        self.most
            .fetch_max(self.out.load(Ordering::Relaxed), Ordering::Relaxed);
        Queued {
            doc,
            bytes,
            gauge: self.out.clone(),
        }
    }

    /// Wait until no more than [`MAX_QUEUED_BYTES`] are out, or until
    /// none has come back for [`STALLED`]. tantivy keeps the documents of
    /// its queue when its indexing threads fail, until the writer is
    /// dropped; the next `add_document` then reports the failure, where
    /// waiting on would never end.
    pub fn wait(&self) {
        let (mut seen, mut since) = (usize::MAX, Instant::now());
        loop {
            let out = self.out.load(Ordering::Relaxed);
            if out <= MAX_QUEUED_BYTES {
                return;
            }
            if out < seen {
                since = Instant::now();
            } else if since.elapsed() > STALLED {
                return;
            }
            seen = out;
            std::thread::sleep(POLL);
        }
    }

    /// Bytes out now.
    #[cfg(test)]
    pub fn out(&self) -> usize {
        self.out.load(Ordering::Relaxed)
    }

    /// The most bytes that were out at once.
    #[cfg(test)]
    pub fn most(&self) -> usize {
        self.most.load(Ordering::Relaxed)
    }
}

/// A document on its way through tantivy's queue.
pub struct Queued {
    doc: TantivyDocument,
    bytes: usize,
    gauge: Arc<AtomicUsize>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.gauge.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl Document for Queued {
    type Value<'a> = <TantivyDocument as Document>::Value<'a>;
    type FieldsValuesIter<'a> = <TantivyDocument as Document>::FieldsValuesIter<'a>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        self.doc.iter_fields_and_values()
    }
}

#[cfg(test)]
mod tests {
    use tantivy::schema::Field;

    use super::*;

    #[test]
    fn a_document_gives_its_bytes_back_when_dropped() {
        let gauge = Gauge::default();
        let mut d = TantivyDocument::default();
        d.add_text(Field::from_field_id(0), "x");
        let q = gauge.queue(d, 100);
        let r = gauge.queue(TantivyDocument::default(), 20);
        assert_eq!(gauge.out(), 120);
        assert_eq!(q.iter_fields_and_values().count(), 1);
        drop(q);
        assert_eq!(gauge.out(), 20);
        drop(r);
        assert_eq!((gauge.out(), gauge.most()), (0, 120));
        gauge.wait();
    }
}
