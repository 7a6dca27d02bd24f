//! The tracker's tabs by id: a Vec kept sorted by id.
//!
//! A `BTreeMap` would do, but its node, rebalancing and `retain` code cost
//! 12 KiB of a binary with a size budget (BENCH.md; the one sort this map
//! needs takes 4 KiB of that back), while the tracker needs
//! little of it: lookups by id, inserts mostly at startup, and iteration in
//! id order so that state.json comes out the same for the same tabs.

use crate::resync::TabRecord;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TabMap {
    /// Sorted by id, ids unique.
    entries: Vec<(String, TabRecord)>,
}

impl TabMap {
    fn position(&self, tab_id: &str) -> Result<usize, usize> {
        self.entries
            .binary_search_by(|(id, _)| id.as_str().cmp(tab_id))
    }

    pub fn get(&self, tab_id: &str) -> Option<&TabRecord> {
        let at = self.position(tab_id).ok()?;
        Some(&self.entries[at].1)
    }

    pub fn get_mut(&mut self, tab_id: &str) -> Option<&mut TabRecord> {
        let at = self.position(tab_id).ok()?;
        Some(&mut self.entries[at].1)
    }

    /// The tab's record, made by `make` if the tab has none yet.
    pub fn get_or_insert_with(
        &mut self,
        tab_id: &str,
        make: impl FnOnce() -> TabRecord,
    ) -> &mut TabRecord {
        let at = match self.position(tab_id) {
            Ok(at) => at,
            Err(at) => {
                self.entries.insert(at, (tab_id.to_string(), make()));
                at
            }
        };
        &mut self.entries[at].1
    }

    /// Adds records for tabs that have none, all at once: inserting them one
    /// by one moves every later entry each time, which made the first
    /// resync of thousands of tabs quadratic (tens of ms on musl's memmove).
    /// Every id in `new` is new and appears once: the sort is not stable,
    /// so which of two records for one id stays would be chance.
    pub fn add_new(&mut self, mut new: Vec<(String, TabRecord)>) {
        if new.is_empty() {
            return;
        }
        self.entries.append(&mut new);
        self.entries.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        debug_assert!(self.entries.windows(2).all(|pair| pair[0].0 < pair[1].0));
    }

    /// Sets the tab's record, replacing any it had.
    pub fn insert(&mut self, tab_id: String, record: TabRecord) {
        match self.position(&tab_id) {
            Ok(at) => self.entries[at].1 = record,
            Err(at) => self.entries.insert(at, (tab_id, record)),
        }
    }

    pub fn remove(&mut self, tab_id: &str) -> Option<TabRecord> {
        let at = self.position(tab_id).ok()?;
        Some(self.entries.remove(at).1)
    }

    /// `keep` is `dyn`: one copy of the loop serves every caller.
    pub fn retain(&mut self, keep: &mut dyn FnMut(&str, &mut TabRecord) -> bool) {
        self.entries.retain_mut(|(id, record)| keep(id, record));
    }

    /// In id order.
    pub fn iter(&self) -> std::slice::Iter<'_, (String, TabRecord)> {
        self.entries.iter()
    }

    pub fn values(&self) -> impl Iterator<Item = &TabRecord> {
        self.entries.iter().map(|(_, record)| record)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut TabRecord> {
        self.entries.iter_mut().map(|(_, record)| record)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
impl TabMap {
    pub fn contains_key(&self, tab_id: &str) -> bool {
        self.get(tab_id).is_some()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(id, _)| id.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
impl std::ops::Index<&str> for TabMap {
    type Output = TabRecord;

    fn index(&self, tab_id: &str) -> &TabRecord {
        self.get(tab_id).expect("no such tab")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(base: &str) -> TabRecord {
        TabRecord {
            base: base.to_string(),
            ..TabRecord::default()
        }
    }

    #[test]
    fn keeps_ids_sorted_and_unique_whatever_the_order_of_inserts() {
        let mut map = TabMap::default();
        for id in ["w1:t2", "w1:t10", "w2:t1", "w1:t1", "w1:t2"] {
            map.insert(id.to_string(), record(id));
        }
        map.get_or_insert_with("w1:t3", || record("new"));
        map.get_or_insert_with("w1:t10", || record("not made"));
        assert_eq!(
            map.keys().collect::<Vec<_>>(),
            ["w1:t1", "w1:t10", "w1:t2", "w1:t3", "w2:t1"]
        );
        assert_eq!(map["w1:t10"].base, "w1:t10");
        assert_eq!(map["w1:t3"].base, "new");
        assert_eq!(map.len(), 5);
    }

    #[test]
    fn new_records_are_merged_in_id_order() {
        let mut map = TabMap::default();
        map.insert("w1:t2".into(), record("kept"));
        let new = ["w2:t1", "w1:t10", "w1:t1"]
            .map(|id| (id.to_string(), record("new")))
            .to_vec();
        map.add_new(new);
        assert_eq!(
            map.keys().collect::<Vec<_>>(),
            ["w1:t1", "w1:t10", "w1:t2", "w2:t1"]
        );
        assert_eq!(map["w1:t2"].base, "kept");
        map.add_new(Vec::new());
        assert_eq!(map.len(), 4);
    }

    #[test]
    fn insert_replaces_and_remove_forgets() {
        let mut map = TabMap::default();
        map.insert("w1:t1".into(), record("old"));
        map.insert("w1:t1".into(), record("new"));
        assert_eq!(map.len(), 1);
        assert_eq!(map.get("w1:t1").map(|r| r.base.as_str()), Some("new"));
        map.get_mut("w1:t1").unwrap().base = "changed".into();
        assert_eq!(map.remove("w1:t1").map(|r| r.base), Some("changed".into()));
        assert_eq!(map.remove("w1:t1"), None);
        assert!(map.is_empty() && !map.contains_key("w1:t1"));
    }

    #[test]
    fn retain_keeps_the_order() {
        let mut map = TabMap::default();
        for id in ["w1:t4", "w1:t3", "w1:t2", "w1:t1"] {
            map.insert(id.to_string(), record(id));
        }
        map.retain(&mut |id, _| id != "w1:t2");
        assert_eq!(map.keys().collect::<Vec<_>>(), ["w1:t1", "w1:t3", "w1:t4"]);
        assert_eq!(
            map.values().map(|r| r.base.as_str()).collect::<Vec<_>>(),
            ["w1:t1", "w1:t3", "w1:t4"]
        );
    }
}
