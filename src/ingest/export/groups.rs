//! A Source's documents grouped by the file they were read from, each group
//! handed out as soon as its last document has been read.
//!
//! A store holds the documents of many files, and subagents are matched to
//! their parents (and Runs grouped) within one file, so a file's documents
//! are encoded together. Knowing where each file's documents end in the
//! reading order (from one column of the store), a group is complete at its
//! last document: memory holds the files being read, one at a time when a
//! store keeps each file's documents together, as `import` writes them.
//! Groups come out in the order of their first document whatever the
//! layout, so the output does not depend on it.

use std::collections::{HashMap, VecDeque};

use crate::formats::model::Storyline;

/// Documents of one file.
struct Group {
    origin: Option<String>,
    docs: Vec<Storyline>,
    complete: bool,
}

/// Documents waiting for the rest of their file.
pub(super) struct Groups {
    /// Reading position of each file's last document (None: one group per
    /// file, complete at the end of the Source).
    ends: Option<HashMap<Option<String>, u64>>,
    open: VecDeque<Group>,
    position: u64,
}

impl Groups {
    pub(super) fn new(ends: Option<HashMap<Option<String>, u64>>) -> Self {
        Groups {
            ends,
            open: VecDeque::new(),
            position: 0,
        }
    }

    /// Take the Source's next document in reading order; `keep` says
    /// whether it is exported (every document advances the position).
    /// Returns the groups this completes, in order.
    pub(super) fn next(&mut self, d: Storyline, keep: bool) -> Vec<Vec<Storyline>> {
        let at = self.position;
        self.position += 1;
        let last = self
            .ends
            .as_ref()
            .is_some_and(|e| e.get(&d.origin_path) == Some(&at));
        let found = self.open.iter_mut().find(|g| g.origin == d.origin_path);
        match found {
            Some(g) => {
                if keep {
                    g.docs.push(d);
                }
                g.complete |= last;
            }
            None if keep => self.open.push_back(Group {
                origin: d.origin_path.clone(),
                docs: vec![d],
                complete: last,
            }),
            None => {}
        }
        let mut out = Vec::new();
        while self.open.front().is_some_and(|g| g.complete) {
            out.extend(self.open.pop_front().map(|g| g.docs));
        }
        out
    }

    /// The groups still open at the end of the Source, in order.
    pub(super) fn finish(self) -> impl Iterator<Item = Vec<Storyline>> {
        self.open.into_iter().map(|g| g.docs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(origin: &str, session: &str) -> Storyline {
        let mut d = Storyline::new(session.to_string(), "agent".to_string());
        d.origin_path = Some(origin.to_string());
        d
    }

    fn sessions(groups: &[Vec<Storyline>]) -> Vec<Vec<&str>> {
        groups
            .iter()
            .map(|g| g.iter().map(|d| d.session.as_str()).collect())
            .collect()
    }

    #[test]
    fn a_file_is_handed_out_at_its_last_document() {
        let docs = [doc("a", "1"), doc("a", "2"), doc("b", "3")];
        let ends = HashMap::from([(Some("a".into()), 1), (Some("b".into()), 2)]);
        let mut g = Groups::new(Some(ends));
        assert!(g.next(docs[0].clone(), true).is_empty());
        assert_eq!(sessions(&g.next(docs[1].clone(), true)), [["1", "2"]]);
        assert_eq!(sessions(&g.next(docs[2].clone(), true)), [["3"]]);
        assert_eq!(g.finish().count(), 0);
    }

    #[test]
    fn interleaved_files_come_out_in_the_order_of_their_first_document() {
        // b ends before a, but a started first: b waits for a.
        let docs = [doc("a", "1"), doc("b", "2"), doc("a", "3"), doc("c", "4")];
        let ends = HashMap::from([
            (Some("a".into()), 2),
            (Some("b".into()), 1),
            (Some("c".into()), 3),
        ]);
        let mut g = Groups::new(Some(ends));
        assert!(g.next(docs[0].clone(), true).is_empty());
        assert!(g.next(docs[1].clone(), true).is_empty());
        assert_eq!(
            sessions(&g.next(docs[2].clone(), true)),
            [vec!["1", "3"], vec!["2"]]
        );
        assert_eq!(sessions(&g.next(docs[3].clone(), true)), [["4"]]);
    }

    #[test]
    fn documents_left_out_still_close_their_file() {
        let docs = [doc("a", "1"), doc("a", "2"), doc("b", "3")];
        let ends = HashMap::from([(Some("a".into()), 1), (Some("b".into()), 2)]);
        let mut g = Groups::new(Some(ends));
        assert!(g.next(docs[0].clone(), true).is_empty());
        assert_eq!(sessions(&g.next(docs[1].clone(), false)), [["1"]]);
        assert!(g.next(docs[2].clone(), false).is_empty());
        assert_eq!(g.finish().count(), 0);
    }

    #[test]
    fn without_ends_every_file_waits_for_the_end() {
        let docs = [doc("a", "1"), doc("b", "2"), doc("a", "3")];
        let mut g = Groups::new(None);
        for d in &docs {
            assert!(g.next(d.clone(), true).is_empty());
        }
        let left: Vec<_> = g.finish().collect();
        assert_eq!(sessions(&left), [vec!["1", "3"], vec!["2"]]);
    }
}
