//! Which status events are news: the status each pane's last event gave.
//!
//! herdr sends a pane's `pane.agent_status_changed` when only the pane's
//! title or the name it shows for the agent changed (its subscription
//! compares those besides the status), so an agent that animates its
//! terminal title sends one every poll while it works. Such an event
//! changes no icon, and a resync for each would be a `tab.list` every few
//! hundred milliseconds for nothing. herdr delivers a pane's events in
//! order, so an event with the status the pane's last one gave is only a
//! new title.

use crate::files::fingerprint;
use crate::labels::Status;

/// The panes of the current status subscription, by a fingerprint of their
/// id (like the subscription's own, so 3000 ids are not kept), each with
/// the status its last event gave, sorted by fingerprint.
#[derive(Debug, Default)]
pub struct PaneStatuses {
    last_seen: Vec<(u64, Status)>,
    /// The subscription's pane count. herdr reports only those panes; a
    /// peer that sends events for made-up ids does not grow the table
    /// past it.
    limit: usize,
}

impl PaneStatuses {
    /// A new subscription of `panes` panes: the first event of each pane
    /// is news again (what happened before it started was never delivered).
    pub fn forget(&mut self, panes: usize) {
        self.last_seen = Vec::new();
        self.limit = panes;
    }

    /// Records what a status event says, and whether it can change an
    /// icon: the pane's first event, a status other than its last one, or
    /// an event that does not say which pane or which status it means.
    pub fn is_news(&mut self, pane_id: Option<&str>, status: Option<&str>) -> bool {
        let Some(pane_id) = pane_id else {
            return true;
        };
        let key = fingerprint(pane_id.as_bytes());
        let found = self.last_seen.binary_search_by_key(&key, |&(k, _)| k);
        let Some(status) = status.and_then(Status::from_name) else {
            // No status, or one a later herdr added: news, and so is the
            // pane's next event, whatever it says.
            if let Ok(index) = found {
                self.last_seen.remove(index);
            }
            return true;
        };
        match found {
            Ok(index) => {
                let last = std::mem::replace(&mut self.last_seen[index].1, status);
                last != status
            }
            Err(index) => {
                if self.last_seen.len() < self.limit {
                    self.last_seen.insert(index, (key, status));
                }
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covering(panes: usize) -> PaneStatuses {
        let mut statuses = PaneStatuses::default();
        statuses.forget(panes);
        statuses
    }

    #[test]
    fn only_a_pane_s_first_event_and_a_new_status_are_news() {
        let mut panes = covering(3000);
        assert!(panes.is_news(Some("w1:p1"), Some("working")));
        // The title moved on; the status did not.
        assert!(!panes.is_news(Some("w1:p1"), Some("working")));
        assert!(!panes.is_news(Some("w1:p1"), Some("working")));
        // Another pane's first event.
        assert!(panes.is_news(Some("w1:p2"), Some("working")));
        assert!(panes.is_news(Some("w1:p1"), Some("blocked")));
        assert!(!panes.is_news(Some("w1:p1"), Some("blocked")));
        // Seen: done becomes idle, which is news.
        assert!(panes.is_news(Some("w1:p2"), Some("done")));
        assert!(panes.is_news(Some("w1:p2"), Some("idle")));
        assert!(!panes.is_news(Some("w1:p2"), Some("idle")));
    }

    #[test]
    fn an_event_that_does_not_say_is_news() {
        let mut panes = covering(3000);
        assert!(panes.is_news(Some("w1:p1"), Some("idle")));
        assert!(panes.is_news(None, Some("idle")));
        assert!(panes.is_news(Some("w1:p1"), None));
        assert!(panes.is_news(Some("w1:p1"), Some("idle")));
        // A status from a later herdr: news every time, and so is the
        // way back from it.
        assert!(panes.is_news(Some("w1:p1"), Some("thinking")));
        assert!(panes.is_news(Some("w1:p1"), Some("thinking")));
        assert!(panes.is_news(Some("w1:p1"), Some("idle")));
        assert!(!panes.is_news(Some("w1:p1"), Some("idle")));
    }

    #[test]
    fn a_new_subscription_starts_afresh() {
        let mut panes = covering(3000);
        assert!(panes.is_news(Some("w1:p1"), Some("working")));
        panes.forget(3000);
        assert!(panes.is_news(Some("w1:p1"), Some("working")));
    }

    /// herdr reports the subscribed panes only; a peer that makes up ids
    /// gets each event taken as news, and the table stays its size.
    #[test]
    fn events_for_more_panes_than_subscribed_are_not_kept() {
        let mut panes = covering(2);
        assert!(panes.is_news(Some("w1:p1"), Some("working")));
        assert!(panes.is_news(Some("w1:p2"), Some("working")));
        for n in 3..10_000 {
            assert!(panes.is_news(Some(&format!("w1:p{n}")), Some("working")));
        }
        assert!(panes.is_news(Some("w1:p9"), Some("working")));
        assert_eq!(panes.last_seen.len(), 2);
        assert!(!panes.is_news(Some("w1:p1"), Some("working")));
    }

    #[test]
    fn many_panes_keep_their_own_statuses() {
        let mut panes = covering(3000);
        for n in (0..3000).rev() {
            assert!(panes.is_news(Some(&format!("w1:p{n}")), Some("working")));
        }
        for n in 0..3000 {
            let status = if n % 7 == 0 { "blocked" } else { "working" };
            assert_eq!(
                panes.is_news(Some(&format!("w1:p{n}")), Some(status)),
                n % 7 == 0,
                "pane {n}"
            );
        }
    }
}
