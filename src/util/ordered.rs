//! A map run on several threads whose results come back in the order the
//! inputs went in: a reader that produces items one at a time on its own
//! thread (a Lance stream, say) hands the work on each item to the workers
//! and still gives its consumer the items in storage order.

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::Scope;

/// Items handed over and not yet given back, per worker: enough to keep
/// every worker busy while the producer reads the next item.
const IN_FLIGHT_PER_WORKER: usize = 2;

/// The producer's end of an ordered map (see the module docs).
pub struct OrderedMap<I, O> {
    jobs: Option<SyncSender<(u64, I)>>,
    results: Receiver<(u64, O)>,
    /// Sequence number of the next item handed over.
    next_in: u64,
    /// Sequence number of the next result given to the consumer.
    next_out: u64,
    /// Results that came back before an earlier one.
    early: BTreeMap<u64, O>,
    cap: u64,
}

impl<I: Send, O: Send> OrderedMap<I, O> {
    /// Start `workers` threads of `scope` that apply `f`. With one worker
    /// or fewer the map still runs on a thread of its own, beside the
    /// producer.
    pub fn start<'scope, 'env, F>(scope: &'scope Scope<'scope, 'env>, workers: usize, f: F) -> Self
    where
        F: Fn(I) -> O + Send + Sync + 'env,
        I: 'env,
        O: 'env,
    {
        let workers = workers.max(1);
        let cap = (workers * IN_FLIGHT_PER_WORKER) as u64;
        let (jobs, queue) = sync_channel::<(u64, I)>(cap as usize);
        let (done, results) = channel::<(u64, O)>();
        let queue = Arc::new(Mutex::new(queue));
        let f = Arc::new(f);
        for _ in 0..workers {
            let (queue, done, f) = (Arc::clone(&queue), done.clone(), Arc::clone(&f));
            scope.spawn(move || work(&queue, &done, &*f));
        }
        OrderedMap {
            jobs: Some(jobs),
            results,
            next_in: 0,
            next_out: 0,
            early: BTreeMap::new(),
            cap,
        }
    }

    /// Hand `item` over, first giving `out` (in input order) the results
    /// that must be taken so that no more than the bound is in flight.
    pub fn push<E>(&mut self, item: I, out: &mut impl FnMut(O) -> Result<(), E>) -> Result<(), E> {
        while self.next_in - self.next_out >= self.cap {
            self.take_one(out)?;
        }
        if let Some(jobs) = &self.jobs {
            // The workers end only when `jobs` is dropped, so this cannot fail
            // unless one panicked, which the scope reports when it ends.
            let _ = jobs.send((self.next_in, item));
            self.next_in += 1;
        }
        Ok(())
    }

    /// Give `out` every remaining result, in input order.
    pub fn finish<E>(mut self, out: &mut impl FnMut(O) -> Result<(), E>) -> Result<(), E> {
        self.jobs = None;
        while self.next_out < self.next_in {
            self.take_one(out)?;
        }
        Ok(())
    }

    /// Wait for the next result in order and give it to `out`.
    fn take_one<E>(&mut self, out: &mut impl FnMut(O) -> Result<(), E>) -> Result<(), E> {
        while !self.early.contains_key(&self.next_out) {
            match self.results.recv() {
                Ok((seq, o)) => {
                    self.early.insert(seq, o);
                }
                // Every worker is gone: one panicked; the scope re-raises it.
                Err(_) => {
                    self.next_out = self.next_in;
                    return Ok(());
                }
            }
        }
        let o = self.early.remove(&self.next_out).expect("checked above");
        self.next_out += 1;
        out(o)
    }
}

fn work<I, O>(
    queue: &Mutex<Receiver<(u64, I)>>,
    done: &Sender<(u64, O)>,
    f: &(dyn Fn(I) -> O + Sync),
) {
    loop {
        // Hold the lock only to take the next item, not while mapping it.
        let next = queue.lock().map(|q| q.recv());
        let Ok(Ok((seq, item))) = next else {
            return;
        };
        if done.send((seq, f(item))).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OrderedMap;

    #[test]
    fn results_come_back_in_input_order() {
        let mut seen = Vec::new();
        std::thread::scope(|s| {
            let mut m = OrderedMap::start(s, 3, |i: u64| {
                // Later items finish first.
                std::thread::sleep(std::time::Duration::from_micros((50 - i % 50) * 20));
                i * 2
            });
            let mut out = |o: u64| -> Result<(), ()> {
                seen.push(o);
                Ok(())
            };
            for i in 0..200 {
                m.push(i, &mut out).unwrap();
            }
            m.finish(&mut out).unwrap();
        });
        assert_eq!(seen, (0..200).map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_consumer_error_stops_the_map_and_the_workers_end() {
        let mut taken = 0;
        let r = std::thread::scope(|s| {
            let mut m = OrderedMap::start(s, 2, |i: u32| i);
            let mut out = |o: u32| {
                taken += 1;
                if o == 5 {
                    Err("stop")
                } else {
                    Ok(())
                }
            };
            for i in 0..100 {
                m.push(i, &mut out)?;
            }
            m.finish(&mut out)
        });
        // The scope ended, so every worker returned after the error.
        assert_eq!(r, Err("stop"));
        assert_eq!(taken, 6);
    }
}
